// `atoll up`: starts a local cluster in the background and returns once it is ready. It
// starts a supervisor (`atoll supervise`, supervise.cc) in a session of its own, which
// starts the services, records the cluster in the state dir and restarts services that
// exit; `up` waits for the supervisor's word through a ready file and prints a summary.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/supervise.h"
#include "common/service/ready_file.h"
#include "launcher/local_cluster.h"
#include "launcher/process.h"

namespace atl {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr auto kPollPeriod = std::chrono::milliseconds(20);
// Beyond the services' ready timeouts: how long a failed start may take to stop what it
// started (LocalCluster's stop timeout, then SIGKILL), and to exit.
constexpr auto kStopAllowance = std::chrono::seconds(10);
constexpr size_t kLogTailLines = 15;

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
  if (config.security.curve()) {
    const std::string keys =
        config.security.keys_dir.empty() ? info.state_dir + "/keys" : config.security.keys_dir;
    std::cout << fmt::format(
        "  {:<10} CURVE, keys in {} (clients: key \"default\"; more: atoll keygen --client NAME)\n",
        "security", keys);
  } else {
    std::cout << fmt::format("  {:<10} plain text: every peer that reaches a port is believed\n",
                             "security");
  }
  std::string stop = "atoll down";
  if (info.state_dir != std::filesystem::absolute(DefaultStateDir()).lexically_normal().string()) {
    stop += " --state-dir " + info.state_dir;
  }
  std::cout << "stop it with: " << stop << std::endl;
}

std::vector<std::string> SupervisorArgv(const SuperviseOptions& up, const std::string& state_dir) {
  std::vector<std::string> argv = {proc::ExecutablePath(),
                                   "--state-dir",
                                   state_dir,
                                   "supervise",
                                   "--config",
                                   up.config,
                                   "--ready-file",
                                   up.ready_file,
                                   "--ready-timeout-s",
                                   fmt::format("{}", up.ready_timeout_s)};
  if (!up.bin_dir.empty()) argv.insert(argv.end(), {"--bin-dir", up.bin_dir});
  if (!up.log_level.empty()) argv.insert(argv.end(), {"--log-level", up.log_level});
  return argv;
}

// Waits for the supervisor `pid` to say through `ready_file` that the cluster is ready (OK) or
// failed (its error, the services it started stopped already), or to exit without a word;
// past `timeout`, tells it to stop everything and fails with DeadlineExceeded.
Status AwaitSupervisor(pid_t pid, const std::string& ready_file, const std::string& log,
                       std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    if (access(ready_file.c_str(), F_OK) == 0) {
      auto said = ReadReadyFile(ready_file);
      if (said.ok()) {
        std::error_code ec;
        fs::remove(ready_file, ec);
        if ((*said)["state"] == "ready") return Status::Ok();
        // It exits next; reaped here so that no process of this cluster outlives `up`.
        const auto exit_deadline = Clock::now() + kStopAllowance;
        while (Clock::now() < exit_deadline) {
          auto exit = proc::TryReap(pid);
          if (!exit.ok() || *exit) break;
          std::this_thread::sleep_for(kPollPeriod);
        }
        return Unavailable((*said)["error"]);
      }
    }
    ATOLL_ASSIGN_OR_RETURN(auto exit, proc::TryReap(pid));
    if (exit) {
      const std::string tail = proc::TailFile(log, kLogTailLines);
      return Unavailable("the supervisor (atoll supervise, pid " + std::to_string(pid) + ") " +
                         exit->Describe() + " before the cluster was ready; its log " + log +
                         (tail.empty() ? " is empty" : " ends with:\n" + tail));
    }
    if (Clock::now() >= deadline) {
      kill(pid, SIGTERM);  // it stops whatever it started
      return DeadlineExceeded("the cluster was not ready within " +
                              std::to_string(timeout.count()) + " ms; its supervisor (pid " +
                              std::to_string(pid) + ") was told to stop it; see " + log);
    }
    std::this_thread::sleep_for(kPollPeriod);
  }
}

Status Up(SuperviseOptions up, const GlobalOptions& global) {
  const std::string state_dir = fs::absolute(global.state_dir).lexically_normal().string();
  for (const char* sub : {"/logs", "/run"}) {
    std::error_code ec;
    fs::create_directories(state_dir + sub, ec);
    if (ec) return Unavailable("cannot create " + state_dir + sub + ": " + ec.message());
  }
  // Checked here too (the supervisor checks again under the state dir's lock) so that a
  // second `up` leaves the running supervisor's log alone.
  ATOLL_RETURN_IF_ERROR(CheckNoRunningCluster(state_dir));
  if (up.config.empty()) up.config = DefaultConfig();
  up.ready_file = state_dir + "/run/supervisor-" + std::to_string(getpid()) + ".ready";
  std::error_code ec;
  fs::remove(up.ready_file, ec);

  proc::SpawnOptions spawn;
  spawn.argv = SupervisorArgv(up, state_dir);
  spawn.log_path = SupervisorLog(state_dir);
  spawn.detach = true;  // outlives `up` and its terminal
  ATOLL_ASSIGN_OR_RETURN(pid_t supervisor, proc::Spawn(spawn));
  // Each of the four stages (rm, stores, executors, schedulers) may take the ready timeout.
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(up.ready_timeout_s * 4000)) +
                       std::chrono::milliseconds(kStopAllowance);
  ATOLL_RETURN_IF_ERROR(AwaitSupervisor(supervisor, up.ready_file, spawn.log_path, timeout));

  ATOLL_ASSIGN_OR_RETURN(ClusterInfo info, ReadClusterInfo(state_dir));
  ATOLL_ASSIGN_OR_RETURN(ClusterConfig config, LoadClusterConfig(info.config_path));
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
