// `atoll stop` (and its older name `atoll down`): stops everything `atoll start` and `atoll
// up` started from this state dir, one record at a time: each joined host first, drained
// (the RM moves its slices onto other devices and tells their clients, DrainHost) before
// its processes stop, then the head. Each record's supervisor goes first, so that nothing
// is restarted (StopRecordedCluster).
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/drain.h"
#include "launcher/local_cluster.h"

namespace atl {

namespace {

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

void PrintStopped(const std::string& prefix, const StopSummary& summary, double timeout_s) {
  std::cout << prefix << "stopped " << summary.stopped.size() << " processes";
  if (!summary.killed.empty()) {
    std::cout << "; killed " << summary.killed.size() << " that ignored SIGTERM for " << timeout_s
              << " s: " << Join(summary.killed);
  }
  if (!summary.not_running.empty()) {
    std::cout << "; already gone: " << Join(summary.not_running);
  }
  if (summary.supervisor == "killed") {
    std::cout << "; killed the supervisor, which ignored SIGTERM for " << timeout_s << " s";
  } else if (summary.supervisor == "not running") {
    std::cout << "; the supervisor was gone already (nothing restarted crashed services)";
  }
  std::cout << std::endl;
}

void RunStop(double timeout_s, const GlobalOptions& global, const std::string& command) {
  const std::vector<std::string> records = ClusterRecords(global.state_dir);
  if (records.empty()) {
    std::cout << "no cluster running from " << global.state_dir << " (nothing to stop)"
              << std::endl;
    return;
  }
  for (const std::string& record : records) {
    auto info = ReadClusterInfo(global.state_dir, record);
    if (!info.ok()) Fail(info.status().WithContext(command));
    if (record != kHeadRecord) DrainHosts(*info);
    auto summary = StopRecordedCluster(
        *info, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    if (!summary.ok()) Fail(summary.status().WithContext(command));
    PrintStopped(record == kHeadRecord ? "" : record + ": ", *summary, timeout_s);
  }
}

void AddStopAs(CLI::App& app, const GlobalOptions& global, const std::string& name,
               const std::string& description) {
  auto timeout_s = std::make_shared<double>(10.0);
  auto* cmd = app.add_subcommand(name, description);
  cmd->add_option("--timeout-s", *timeout_s,
                  "Seconds to wait after SIGTERM before killing what still runs")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->callback([timeout_s, &global, name] { RunStop(*timeout_s, global, name); });
}

}  // namespace

void AddStopCommands(CLI::App& app, const GlobalOptions& global) {
  AddStopAs(app, global, "stop",
            "Stop what `atoll start` and `atoll up` started from the state dir (hosts are "
            "drained first)");
  AddStopAs(app, global, "down", "Stop the cluster started by `atoll up` (the same as stop)");
}

}  // namespace atl
