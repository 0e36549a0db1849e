// `atoll down`: stops the cluster recorded in the state dir (its supervisor first, so that
// nothing is restarted) and removes its cluster.toml.
#include <iostream>

#include "cli/commands.h"
#include "launcher/local_cluster.h"

namespace atl {

namespace {

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

void RunDown(double timeout_s, const GlobalOptions& global) {
  auto info = ReadClusterInfo(global.state_dir);
  if (!info.ok()) {
    if (info.status().code() == Code::kNotFound) {
      std::cout << "no cluster running from " << global.state_dir << " (nothing to stop)"
                << std::endl;
      return;
    }
    Fail(info.status().WithContext("down"));
  }
  auto summary =
      StopRecordedCluster(*info, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  if (!summary.ok()) Fail(summary.status().WithContext("down"));
  std::cout << "stopped " << summary->stopped.size() << " processes";
  if (!summary->killed.empty()) {
    std::cout << "; killed " << summary->killed.size() << " that ignored SIGTERM for " << timeout_s
              << " s: " << Join(summary->killed);
  }
  if (!summary->not_running.empty()) {
    std::cout << "; already gone: " << Join(summary->not_running);
  }
  if (summary->supervisor == "killed") {
    std::cout << "; killed the supervisor, which ignored SIGTERM for " << timeout_s << " s";
  } else if (summary->supervisor == "not running") {
    std::cout << "; the supervisor was gone already (nothing restarted crashed services)";
  }
  std::cout << std::endl;
}

}  // namespace

void AddDownCommand(CLI::App& app, const GlobalOptions& global) {
  auto timeout_s = std::make_shared<double>(10.0);
  auto* cmd = app.add_subcommand("down", "Stop the cluster started by `atoll up`");
  cmd->add_option("--timeout-s", *timeout_s,
                  "Seconds to wait after SIGTERM before killing what still runs")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->callback([timeout_s, &global] { RunDown(*timeout_s, global); });
}

}  // namespace atl
