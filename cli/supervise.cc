// `atoll supervise` (hidden; `atoll up` starts it): the process that owns a local cluster
// started by `atoll up`. It starts every service as its own child (LocalCluster), writes
// cluster.toml with itself recorded as the supervisor, tells `atoll up` through its
// --ready-file whether the cluster came up ("state" = "ready", or "failed" with "error"),
// then restarts services that exit with backoff (LocalCluster::Supervise) until SIGTERM or
// SIGINT, when it stops them all and exits. Its log is <state dir>/logs/supervisor.log.
//
// The services run in their own session (detached): should the supervisor itself die, the
// cluster keeps running unsupervised, and `atoll down` stops it all the same.
#include <unistd.h>

#include <thread>

#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/supervise.h"
#include "common/net/event_loop.h"
#include "common/service/ready_file.h"
#include "launcher/local_cluster.h"
#include "launcher/process.h"

namespace atl {

namespace {

// How often the supervisor looks at its children: a crashed service waits at most this long
// to be noticed, on top of its backoff delay.
constexpr auto kSupervisePeriod = std::chrono::milliseconds(50);

Status Supervise(const SuperviseOptions& opts, const GlobalOptions& global) {
  LocalClusterOptions options;
  options.config_path = opts.config;
  options.state_dir = global.state_dir;
  options.bin_dir = opts.bin_dir;
  options.log_level = opts.log_level;
  options.ready_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(opts.ready_timeout_s * 1000));
  options.detach = true;
  options.supervisor.name = "supervisor";
  options.supervisor.role = "supervisor";
  options.supervisor.program = proc::ExecutablePath();
  options.supervisor.pid = getpid();
  options.supervisor.log = SupervisorLog(options.state_dir);
  InstallShutdownSignals();
  LocalCluster cluster(options);
  const Status started = cluster.Start();
  const Status told = WriteReadyFile(
      opts.ready_file, started.ok() ? std::map<std::string, std::string>{{"state", "ready"}}
                                    : std::map<std::string, std::string>{
                                          {"state", "failed"}, {"error", started.message()}});
  if (!started.ok()) return started;
  if (!told.ok()) {
    static_cast<void>(cluster.Stop());
    return told.WithContext("telling `atoll up` that the cluster is ready");
  }
  spdlog::info("cluster up from {}; supervising {} services", cluster.info().state_dir,
               cluster.info().processes.size());
  while (!ShutdownRequested()) {
    const Status s = cluster.Supervise();
    if (!s.ok()) spdlog::error("supervise: {}", s.ToString());
    std::this_thread::sleep_for(kSupervisePeriod);
  }
  spdlog::info("stopping the cluster");
  return cluster.Stop();
}

}  // namespace

std::string SupervisorLog(const std::string& state_dir) {
  return state_dir + "/logs/supervisor.log";
}

void AddSuperviseCommand(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<SuperviseOptions>();
  auto* cmd = app.add_subcommand("supervise",
                                 "Run a local cluster in the foreground, restarting "
                                 "services that exit (`atoll up` starts this)");
  cmd->group("");  // hidden from --help: `atoll up` is the command to use
  cmd->add_option("--config", opts->config, "Cluster config")->required();
  cmd->add_option("--bin-dir", opts->bin_dir, "Where atoll-rm and the other services are");
  cmd->add_option("--log-level", opts->log_level, "Log level of every service");
  cmd->add_option("--ready-timeout-s", opts->ready_timeout_s,
                  "Seconds each service may take to become ready")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--ready-file", opts->ready_file,
                  "Where to say whether the cluster came up (state = ready or failed)")
      ->required();
  cmd->callback([opts, &global] {
    const Status s = Supervise(*opts, global);
    if (!s.ok()) Fail(s.WithContext("supervise"));
  });
}

}  // namespace atl
