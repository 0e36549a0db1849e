#include "cli/start_path.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include <fmt/format.h>

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

std::vector<std::string> SupervisorArgv(const SuperviseOptions& start,
                                        const std::string& state_dir) {
  std::vector<std::string> argv = {proc::ExecutablePath(),
                                   "--state-dir",
                                   state_dir,
                                   "supervise",
                                   "--config",
                                   start.config,
                                   "--plan",
                                   PlanToJson(start.plan),
                                   "--ready-file",
                                   start.ready_file,
                                   "--ready-timeout-s",
                                   fmt::format("{}", start.ready_timeout_s)};
  if (!start.bin_dir.empty()) argv.insert(argv.end(), {"--bin-dir", start.bin_dir});
  if (!start.log_level.empty()) argv.insert(argv.end(), {"--log-level", start.log_level});
  if (!start.keys_dir.empty()) argv.insert(argv.end(), {"--keys-dir", start.keys_dir});
  return argv;
}

// Waits for the supervisor `pid` to say through `ready_file` that its services are ready
// (OK) or failed (its error, the services it started stopped already), or to exit without
// a word; past `timeout`, tells it to stop everything and fails with DeadlineExceeded.
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
        // It exits next; reaped here so that nothing it started outlives the command.
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
                         exit->Describe() + " before its services were ready; its log " + log +
                         (tail.empty() ? " is empty" : " ends with:\n" + tail));
    }
    if (Clock::now() >= deadline) {
      kill(pid, SIGTERM);  // it stops whatever it started
      return DeadlineExceeded("the services were not ready within " +
                              std::to_string(timeout.count()) + " ms; their supervisor (pid " +
                              std::to_string(pid) + ") was told to stop them; see " + log);
    }
    std::this_thread::sleep_for(kPollPeriod);
  }
}

}  // namespace

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
    if (fs::is_regular_file(c, ec)) return c;
  }
  return candidates.front();
}

std::string AbsoluteStateDir(const GlobalOptions& global) {
  return fs::absolute(global.state_dir.empty() ? DefaultStateDir() : global.state_dir)
      .lexically_normal()
      .string();
}

std::string StateDirFlag(const std::string& state_dir) {
  const std::string default_dir = fs::absolute(DefaultStateDir()).lexically_normal().string();
  return state_dir == default_dir ? "" : " --state-dir " + state_dir;
}

void PrintSecurity(const ClusterInfo& info, int width) {
  if (info.keys_dir.empty()) {
    std::cout << fmt::format("  {:<{}} plain text: every peer that reaches a port is believed\n",
                             "security", width);
    return;
  }
  std::cout << fmt::format(
      "  {:<{}} CURVE, keys in {} (clients: key \"default\"; more: atoll keygen --client NAME)\n",
      "security", width, info.keys_dir);
}

Result<ClusterInfo> StartSupervised(SuperviseOptions start, const GlobalOptions& global) {
  const std::string state_dir = AbsoluteStateDir(global);
  for (const char* sub : {"/logs", "/run"}) {
    std::error_code ec;
    fs::create_directories(state_dir + sub, ec);
    if (ec) return Unavailable("cannot create " + state_dir + sub + ": " + ec.message());
  }
  const std::string record = start.plan.RecordName();
  // Checked here too (the supervisor checks again under the state dir's lock) so that a
  // second start leaves the running supervisor's log alone.
  ATOLL_RETURN_IF_ERROR(CheckNoRunningCluster(state_dir, record));
  if (start.config.empty()) start.config = DefaultConfig();
  start.ready_file = state_dir + "/run/supervisor-" + std::to_string(getpid()) + ".ready";
  std::error_code ec;
  fs::remove(start.ready_file, ec);

  proc::SpawnOptions spawn;
  spawn.argv = SupervisorArgv(start, state_dir);
  spawn.log_path = SupervisorLog(state_dir, record);
  spawn.detach = true;  // outlives the command and its terminal
  ATOLL_ASSIGN_OR_RETURN(pid_t supervisor, proc::Spawn(spawn));
  // Each of the four stages (rm, stores, executors, schedulers) may take the ready timeout.
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(start.ready_timeout_s * 4000)) +
      std::chrono::milliseconds(kStopAllowance);
  ATOLL_RETURN_IF_ERROR(AwaitSupervisor(supervisor, start.ready_file, spawn.log_path, timeout));
  return ReadClusterInfo(state_dir, record);
}

}  // namespace atl
