// `atoll up`: starts a local cluster in the background (see local_cluster.h) and records it
// in the state dir; the services keep running after this command returns.
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.h"
#include "launcher/local_cluster.h"
#include "launcher/process.h"

namespace atl {

namespace {

struct UpOptions {
  std::string config;
  std::string bin_dir;
  std::string log_level;
  double ready_timeout_s = 20;
};

// The default config: ./config/local.toml, else the source tree's (ATOLL_DEFAULT_CONFIG),
// else <bin>/../config/local.toml, else <bin>/../share/atoll/local.toml.
std::string DefaultConfig() {
  std::vector<std::string> candidates = {"config/local.toml"};
#ifdef ATOLL_DEFAULT_CONFIG
  candidates.push_back(ATOLL_DEFAULT_CONFIG);
#endif
  const std::string bin = proc::ExecutableDir();
  candidates.push_back(bin + "/../config/local.toml");
  candidates.push_back(bin + "/../share/atoll/local.toml");
  for (const auto& c : candidates) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(c, ec)) return c;
  }
  return candidates.front();
}

void PrintSummary(const LocalCluster& cluster) {
  const ClusterInfo& info = cluster.info();
  const ClusterConfig& config = cluster.config();
  size_t hosts = 0;
  size_t devices = 0;
  std::cout << "cluster up (config " << info.config_path << ")\n";
  std::cout << fmt::format("  {:<10} {}   events in {}, out {}\n", "rm", info.rm_endpoint,
                           info.events_in, info.events_out);
  for (const auto& island : config.islands) {
    size_t island_devices = 0;
    std::string names;
    for (const auto& h : island.hosts) {
      island_devices += h.devices;
      names += (names.empty() ? "" : ", ") + h.name;
    }
    hosts += island.hosts.size();
    devices += island_devices;
    std::string scheduler = "?";
    if (const ProcessInfo* p = info.Find("scheduler-" + island.name)) {
      auto it = p->endpoints.find("endpoint");
      if (it != p->endpoints.end()) scheduler = it->second;
    }
    std::cout << fmt::format("  {:<10} {} hosts ({}), {} devices, scheduler {}\n", island.name,
                             island.hosts.size(), names, island_devices, scheduler);
  }
  std::cout << fmt::format("  {:<10} {} islands, {} hosts, {} devices, {} processes\n", "total",
                           config.islands.size(), hosts, devices, info.processes.size());
  std::cout << fmt::format("  {:<10} {} (logs in {}/logs)\n", "state", info.state_dir,
                           info.state_dir);
  std::string stop = "atoll down";
  if (info.state_dir != std::filesystem::absolute(DefaultStateDir()).lexically_normal().string()) {
    stop += " --state-dir " + info.state_dir;
  }
  std::cout << "stop it with: " << stop << std::endl;
}

void RunUp(const UpOptions& up, const GlobalOptions& global) {
  LocalClusterOptions options;
  options.config_path = up.config.empty() ? DefaultConfig() : up.config;
  options.state_dir = global.state_dir;
  options.bin_dir = up.bin_dir;
  options.log_level = up.log_level;
  options.ready_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(up.ready_timeout_s * 1000));
  options.detach = true;
  LocalCluster cluster(options);
  const Status status = cluster.Start();
  if (!status.ok()) Fail(status.WithContext("up"));
  cluster.Detach();
  PrintSummary(cluster);
}

}  // namespace

void AddUpCommand(CLI::App& app, const GlobalOptions& global) {
  auto up = std::make_shared<UpOptions>();
  auto* cmd = app.add_subcommand("up", "Start a local cluster in the background");
  cmd->add_option("--config", up->config,
                  "Cluster config (default: config/local.toml, else the one installed with atoll)");
  cmd->add_option("--bin-dir", up->bin_dir,
                  "Where atoll-rm and the other services are (default: atoll's own directory)");
  cmd->add_option("--log-level", up->log_level,
                  "Log level of every service: trace, debug, info, warn, error, off "
                  "(default: the config's)");
  cmd->add_option("--ready-timeout-s", up->ready_timeout_s,
                  "Seconds each service may take to become ready")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->callback([up, &global] { RunUp(*up, global); });
}

}  // namespace atl
