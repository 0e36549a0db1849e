// `atoll supervise` (hidden; `atoll up` and `atoll start` start it): the process that owns
// the services one of them started on this machine. It starts every service of its plan
// (--plan) as its own child (LocalCluster), writes the plan's record (cluster.toml, or
// host-<name>.toml) with itself recorded as the supervisor, tells the command through its
// --ready-file whether they came up ("state" = "ready", or "failed" with "error"), then
// restarts services that exit with backoff (LocalCluster::Supervise) until SIGTERM or
// SIGINT, when it stops them all and exits. Its log is SupervisorLog().
//
// The services run in their own session (detached): should the supervisor itself die, they
// keep running unsupervised, and `atoll stop` stops them all the same.
#include <unistd.h>

#include <thread>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

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
  options.plan = opts.plan;
  options.keys_dir = opts.keys_dir;
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
  options.supervisor.log = SupervisorLog(options.state_dir, opts.plan.RecordName());
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
    return told.WithContext("telling the command that started it that it is ready");
  }
  spdlog::info("{} up from {}; supervising {} services", cluster.info().record,
               cluster.info().state_dir, cluster.info().processes.size());
  while (!ShutdownRequested()) {
    const Status s = cluster.Supervise();
    if (!s.ok()) spdlog::error("supervise: {}", s.ToString());
    std::this_thread::sleep_for(kSupervisePeriod);
  }
  spdlog::info("stopping {}", cluster.info().record);
  return cluster.Stop();
}

}  // namespace

std::string SupervisorLog(const std::string& state_dir, const std::string& record) {
  return state_dir + "/logs/supervisor" + (record == kHeadRecord ? "" : "-" + record) + ".log";
}

std::string PlanToJson(const StartPlan& plan) {
  nlohmann::json hosts = nlohmann::json::array();
  for (const auto& planned : plan.hosts) {
    hosts.push_back({{"name", planned.host.name},
                     {"island", planned.island},
                     {"devices", planned.host.devices},
                     {"kind", planned.host.kind}});
  }
  return nlohmann::json{{"join_rm", plan.join_rm},
                        {"events_in", plan.events_in},
                        {"events_out", plan.events_out},
                        {"schedulers", plan.schedulers},
                        {"hosts", hosts},
                        {"bind", plan.bind},
                        {"advertise", plan.advertise},
                        {"rm_state_file", plan.rm_state_file}}
      .dump();
}

Result<StartPlan> PlanFromJson(const std::string& json) {
  try {
    const auto j = nlohmann::json::parse(json);
    StartPlan plan;
    j.at("join_rm").get_to(plan.join_rm);
    j.at("events_in").get_to(plan.events_in);
    j.at("events_out").get_to(plan.events_out);
    j.at("schedulers").get_to(plan.schedulers);
    j.at("bind").get_to(plan.bind);
    j.at("advertise").get_to(plan.advertise);
    j.at("rm_state_file").get_to(plan.rm_state_file);
    for (const auto& h : j.at("hosts")) {
      HostPlacement planned;
      h.at("name").get_to(planned.host.name);
      h.at("island").get_to(planned.island);
      h.at("devices").get_to(planned.host.devices);
      h.at("kind").get_to(planned.host.kind);
      plan.hosts.push_back(std::move(planned));
    }
    return plan;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("not a start plan: ") + e.what());
  }
}

void AddSuperviseCommand(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<SuperviseOptions>();
  auto plan_json = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("supervise",
                                 "Run services in the foreground, restarting those that exit "
                                 "(`atoll up` and `atoll start` start this)");
  cmd->group("");  // hidden from --help: `atoll up` and `atoll start` are the commands to use
  cmd->add_option("--config", opts->config, "Cluster config")->required();
  cmd->add_option("--plan", *plan_json, "What to start: a StartPlan as JSON")->required();
  cmd->add_option("--keys-dir", opts->keys_dir, "The services' CURVE keys directory");
  cmd->add_option("--bin-dir", opts->bin_dir, "Where atoll-rm and the other services are");
  cmd->add_option("--log-level", opts->log_level, "Log level of every service");
  cmd->add_option("--ready-timeout-s", opts->ready_timeout_s,
                  "Seconds each service may take to become ready")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--ready-file", opts->ready_file,
                  "Where to say whether the cluster came up (state = ready or failed)")
      ->required();
  cmd->callback([opts, plan_json, &global] {
    auto plan = PlanFromJson(*plan_json);
    if (!plan.ok()) Fail(plan.status().WithContext("supervise"));
    opts->plan = *std::move(plan);
    const Status s = Supervise(*opts, global);
    if (!s.ok()) Fail(s.WithContext("supervise"));
  });
}

}  // namespace atl
