#include "cli/foreground.h"

#include <iostream>
#include <thread>

#include "cli/drain.h"
#include "common/net/event_loop.h"
#include "launcher/local_cluster.h"
#include "launcher/process.h"

namespace atl {

namespace {

// How often the command looks at its supervisor and at the stop signals.
constexpr auto kPollPeriod = std::chrono::milliseconds(100);

}  // namespace

Status StayInForeground(const ClusterInfo& info, std::chrono::milliseconds stop_timeout) {
  const auto supervisor = static_cast<pid_t>(info.supervisor.pid);
  while (!ShutdownRequested()) {
    ATOLL_ASSIGN_OR_RETURN(auto exit, proc::TryReap(supervisor));
    if (exit) {
      return Unavailable("the supervisor (pid " + std::to_string(supervisor) + ") " +
                         exit->Describe() + ", and with it " + info.record + "; see " +
                         info.supervisor.log);
    }
    std::this_thread::sleep_for(kPollPeriod);
  }
  std::cout << "stopping " << info.record << std::endl;
  if (info.record != kHeadRecord) DrainHosts(info);
  // The supervisor stops its services itself; StopRecordedCluster sees it end (a child not
  // reaped yet counts as ended) and then stops whatever it left.
  auto stopped = StopRecordedCluster(info, stop_timeout);
  static_cast<void>(proc::TryReap(supervisor));
  if (!stopped.ok()) return stopped.status();
  std::cout << "stopped " << info.record << ": " << stopped->stopped.size() << " processes"
            << std::endl;
  return Status::Ok();
}

}  // namespace atl
