// `atoll up`: a whole local cluster, as `atoll start head` and an `atoll start host` for
// each host of the config would start it, under one supervisor: the config's StartPlan
// (WholeCluster) goes the one start path (start_path.h), and a summary is printed.
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/start_path.h"
#include "launcher/local_cluster.h"

namespace atl {

namespace {

void PrintSummary(const ClusterInfo& info, const ClusterConfig& config) {
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
  std::cout << fmt::format("  {:<10} pid {}, restarts services that exit (log {})\n", "supervisor",
                           info.supervisor.pid, info.supervisor.log);
  std::cout << fmt::format("  {:<10} {} (logs in {}/logs)\n", "state", info.state_dir,
                           info.state_dir);
  PrintSecurity(info, 10);
  std::cout << "stop it with: atoll down" << StateDirFlag(info.state_dir) << std::endl;
}

Status Up(SuperviseOptions up, const GlobalOptions& global) {
  if (up.config.empty()) up.config = DefaultConfig();
  ATOLL_ASSIGN_OR_RETURN(ClusterConfig config, LoadClusterConfig(up.config));
  up.plan = WholeCluster(config);
  ATOLL_ASSIGN_OR_RETURN(ClusterInfo info, StartSupervised(up, global));
  PrintSummary(info, config);
  return Status::Ok();
}

}  // namespace

void AddUpCommand(CLI::App& app, const GlobalOptions& global) {
  auto up = std::make_shared<SuperviseOptions>();
  auto* cmd = app.add_subcommand(
      "up", "Start a local cluster in the background, restarting services that exit");
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
  cmd->callback([up, &global] {
    const Status s = Up(*up, global);
    if (!s.ok()) Fail(s.WithContext("up"));
  });
}

}  // namespace atl
