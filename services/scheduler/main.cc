// atoll-scheduler: the gang scheduler of one island.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "common/service/ready_file.h"
#include "common/service/service_main.h"
#include "services/scheduler/scheduler_service.h"

namespace {

constexpr auto kRegisterTimeout = std::chrono::seconds(10);

atl::Status Serve(atl::ServiceOptions& options, atl::scheduler::SchedulerOptions scheduling,
                  const std::string& rm_endpoint) {
  ATOLL_ASSIGN_OR_RETURN(atl::ClusterConfig config,
                         atl::StartService("scheduler/" + scheduling.island, options));
  if (!rm_endpoint.empty()) config.rm_endpoint = rm_endpoint;
  if (scheduling.policy.empty()) scheduling.policy = config.scheduler_policy;
  if (scheduling.window == 0) scheduling.window = config.scheduler_window;
  const std::string island = scheduling.island;
  zmq::context_t context;
  // Before any socket: each socket takes the keys its context has when it is made.
  ATOLL_ASSIGN_OR_RETURN(auto zap, atl::SecureService(context, config));
  atl::scheduler::SchedulerService scheduler(context, std::move(config), std::move(scheduling));
  ATOLL_RETURN_IF_ERROR(scheduler.Start(kRegisterTimeout));
  std::map<std::string, std::string> ready;
  atl::AddReadyEndpoint(ready, "endpoint", scheduler.endpoint());
  ATOLL_RETURN_IF_ERROR(atl::WriteReadyFile(options.ready_file, ready));
  spdlog::info("scheduling island {} on {} (bound {})", island, scheduler.endpoint().advertised,
               scheduler.endpoint().bound);
  scheduler.Run();
  spdlog::info("stopped");
  return atl::Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"atoll island scheduler"};
  atl::ServiceOptions options;
  atl::scheduler::SchedulerOptions scheduling;
  scheduling.policy.clear();  // empty: the config's
  std::string rm_endpoint;
  atl::AddServiceOptions(app, options);
  app.add_option("--island", scheduling.island, "the island this scheduler orders")->required();
  app.add_option("--policy", scheduling.policy, "fifo or share (overrides scheduler.policy)");
  app.add_option("--window", scheduling.window,
                 "gangs in flight at most, 0: no limit (overrides scheduler.window)");
  app.add_option("--rm", rm_endpoint, "the RM's request endpoint (overrides rm.endpoint)");
  app.add_option("--endpoint", scheduling.endpoint,
                 "the address to serve clients on (default: a free port on cluster.bind_host)");
  CLI11_PARSE(app, argc, argv);
  return atl::ExitCode(Serve(options, std::move(scheduling), rm_endpoint));
}
