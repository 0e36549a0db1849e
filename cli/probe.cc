// `atoll probe live` and `atoll probe ready`: the health checks of a container whose main
// process is `atoll start head|host --foreground` (a compose healthcheck, Kubernetes'
// liveness and readiness probes), over every part the state dir records.
//
//   live   the part's supervisor and each of its services run. Local only: a part whose
//          RM is away stays live (restarting it would not bring the RM back).
//   ready  live, and the RM counts the part in: it answers (as a member, with the record's
//          keys), each island scheduler the part started is the one registered and alive,
//          and each host it started has joined (the RM counts its executor and store
//          alive).
//
// Exit status 0 with one line saying what holds, else 1 with the first thing that does not.
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/rm_member.h"
#include "common/proto/protocol.h"
#include "launcher/local_cluster.h"
#include "launcher/process.h"

namespace atl {

namespace {

namespace fs = std::filesystem;

struct ProbeOptions {
  bool ready = false;
  int64_t timeout_ms = 3000;
};

Status CheckLive(const ClusterInfo& info) {
  const ProcessInfo& supervisor = info.supervisor;
  if (!proc::IsProgram(static_cast<pid_t>(supervisor.pid),
                       fs::path(supervisor.program).filename().string())) {
    return Unavailable(
        fmt::format("{}: its supervisor (pid {}) is not running", info.record, supervisor.pid));
  }
  const auto running = RunningProcesses(info);
  for (const auto& p : info.processes) {
    const bool runs = std::any_of(running.begin(), running.end(),
                                  [&](const ProcessInfo& r) { return r.name == p.name; });
    if (!runs) {
      return Unavailable(fmt::format("{}: {} is not running{}", info.record, p.name,
                                     p.pid == 0 ? " (its supervisor starts it again)" : ""));
    }
  }
  return Status::Ok();
}

const proto::IslandStatus* IslandNamed(const proto::ClusterStatus& status,
                                       const std::string& name) {
  for (const auto& island : status.islands) {
    if (island.name == name) return &island;
  }
  return nullptr;
}

const proto::HostStatus* HostNamed(const proto::ClusterStatus& status, const std::string& name) {
  for (const auto& island : status.islands) {
    for (const auto& host : island.hosts) {
      if (host.name == name) return &host;
    }
  }
  return nullptr;
}

Status CheckCountedIn(const ClusterInfo& info, std::chrono::milliseconds timeout) {
  auto status = AskRmAsMember<proto::ClusterStatus>(info.rm_endpoint, info.keys_dir,
                                                    proto::GetClusterStatus{}, timeout);
  if (!status.ok()) {
    return status.status().WithContext(
        fmt::format("{}: asking the RM at {}", info.record, info.rm_endpoint));
  }
  for (const auto& p : info.processes) {
    if (p.role == "scheduler") {
      const proto::IslandStatus* island = IslandNamed(*status, p.target);
      auto endpoint = p.endpoints.find("endpoint");
      if (island == nullptr || !island->scheduler_alive ||
          (endpoint != p.endpoints.end() && island->scheduler_endpoint != endpoint->second)) {
        return Unavailable(fmt::format("{}: the RM does not count {} as island {}'s scheduler",
                                       info.record, p.name, p.target));
      }
    } else if (p.role == "executor") {
      const proto::HostStatus* host = HostNamed(*status, p.target);
      if (host == nullptr || !host->alive || !host->store_alive) {
        return Unavailable(
            fmt::format("{}: host {} has not joined (the RM does not count its "
                        "executor and object store alive)",
                        info.record, p.target));
      }
    }
  }
  return Status::Ok();
}

Status Probe(const ProbeOptions& options, const GlobalOptions& global) {
  const std::vector<std::string> records = ClusterRecords(global.state_dir);
  if (records.empty()) return Unavailable("nothing started from " + global.state_dir);
  for (const std::string& record : records) {
    ATOLL_ASSIGN_OR_RETURN(ClusterInfo info, ReadClusterInfo(global.state_dir, record));
    ATOLL_RETURN_IF_ERROR(CheckLive(info));
    if (options.ready) {
      ATOLL_RETURN_IF_ERROR(CheckCountedIn(info, std::chrono::milliseconds(options.timeout_ms)));
    }
  }
  std::cout << (options.ready ? "ready: " : "live: ") << fmt::format("{}", fmt::join(records, ", "))
            << std::endl;
  return Status::Ok();
}

}  // namespace

void AddProbeCommand(CLI::App& app, const GlobalOptions& global) {
  auto* probe = app.add_subcommand(
      "probe", "Health checks of what `atoll start` runs here (container probes)");
  probe->require_subcommand(1);
  for (const bool ready : {false, true}) {
    auto options = std::make_shared<ProbeOptions>();
    options->ready = ready;
    auto* cmd = probe->add_subcommand(
        ready ? "ready" : "live",
        ready ? "Exit 0 when every part started here is live and the RM counts it in (its "
                "schedulers registered, its hosts joined)"
              : "Exit 0 when every part started here runs: its supervisor and its services");
    if (ready) {
      cmd->add_option("--timeout-ms", options->timeout_ms, "How long the RM may take to answer")
          ->capture_default_str()
          ->check(CLI::PositiveNumber);
    }
    cmd->callback([options, &global, ready] {
      const Status s = Probe(*options, global);
      if (!s.ok()) Fail(s.WithContext(ready ? "probe ready" : "probe live"));
    });
  }
}

}  // namespace atl
