// `atoll start head` and `atoll start host`: a cluster across machines, one part at a time.
// The head is the RM and a scheduler per island; a host (an object store and an executor)
// joins a running head from any machine that reaches it, with the cluster's keys, and
// starts its island's scheduler too when the RM says the island has none. Each part runs
// under a supervisor of its own (start_path.h) and is recorded in the state dir, where
// `atoll stop` finds it. With --foreground the command stays attached to its part until it
// is told to stop (foreground.h): a container's main process.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/foreground.h"
#include "cli/rm_member.h"
#include "cli/start_path.h"
#include "common/net/event_loop.h"
#include "common/proto/protocol.h"
#include "common/service/advertise.h"
#include "common/service/host_options.h"
#include "launcher/local_cluster.h"

namespace atl {

namespace {

namespace fs = std::filesystem;

// The width of a summary's first column: a process's name.
constexpr int kWidth = 22;
// How long `start host` waits for the RM to say what the cluster is.
constexpr auto kAskTimeout = std::chrono::seconds(10);
// How long a foreground part told to stop gives each process after SIGTERM (as `atoll
// stop`'s default).
constexpr auto kStopTimeout = std::chrono::seconds(10);

struct StartHeadOptions {
  SuperviseOptions start;
  bool foreground = false;
  std::vector<std::string> islands;
  std::string rm_state;
};

struct StartHostOptions {
  SuperviseOptions start;
  bool foreground = false;
  std::string host;
  HostOptions description;
};

// The options every part takes: where the config and the binaries are, logging, readiness,
// the services' addresses, and whether the command stays in the foreground.
void AddCommonOptions(CLI::App* cmd, SuperviseOptions& start, bool& foreground) {
  cmd->add_flag("--foreground", foreground,
                "Stay attached until told to stop (SIGTERM, Ctrl-C), then stop the part as "
                "`atoll stop` would; exit when its supervisor does (a container's command)");
  cmd->add_option("--config", start.config,
                  "Cluster config (default: config/local.toml, else the one installed with atoll)");
  cmd->add_option("--bind", start.plan.bind,
                  "Address every service binds: an interface's address or name, or 0.0.0.0 "
                  "(default: the config's cluster.bind_host)");
  cmd->add_option("--advertise", start.plan.advertise,
                  "Address the services put in the endpoints they register (default: the "
                  "bound one; for 0.0.0.0, the interface that routes to the RM)");
  cmd->add_option("--bin-dir", start.bin_dir,
                  "Where atoll-rm and the other services are (default: atoll's own directory)");
  cmd->add_option("--log-level", start.log_level,
                  "Log level of every service: trace, debug, info, warn, error, off "
                  "(default: the config's)");
  cmd->add_option("--ready-timeout-s", start.ready_timeout_s,
                  "Seconds each service may take to become ready")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
}

// Names end up in file names (host-<name>.toml, logs/executor-<name>.log).
Status CheckName(const std::string& what, const std::string& name) {
  const bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
  if (plain) return Status::Ok();
  return InvalidArgument(
      fmt::format("{} name '{}' may hold only letters, digits, '.', '_' and '-'", what, name));
}

// Starts a part's plan under its supervisor; a foreground start takes the stop signals
// first, so that one arriving while the part comes up stops it once it is up.
Result<ClusterInfo> StartPart(const SuperviseOptions& start, bool foreground,
                              const GlobalOptions& global) {
  if (foreground) InstallShutdownSignals();
  return StartSupervised(start, global);
}

// The summary's last line, and for a foreground part the wait until it is told to stop.
Status Attend(const ClusterInfo& info, bool foreground, const std::string& how_stop_drains) {
  if (!foreground) {
    std::cout << "stop it with: atoll stop" << StateDirFlag(info.state_dir) << how_stop_drains
              << std::endl;
    return Status::Ok();
  }
  std::cout << "running in the foreground: SIGTERM or Ctrl-C stops it" << how_stop_drains
            << std::endl;
  return StayInForeground(info, kStopTimeout);
}

// Each service's endpoints, one line per process.
void PrintProcesses(const ClusterInfo& info) {
  for (const auto& p : info.processes) {
    std::string endpoints;
    for (const auto& [key, endpoint] : p.endpoints) {
      if (key == "arena" || key.starts_with("bind_")) continue;
      endpoints += (endpoints.empty() ? "" : ", ") + key + " " + endpoint;
    }
    std::cout << fmt::format("  {:<{}} {}\n", p.name, kWidth, endpoints);
  }
  std::cout << fmt::format("  {:<{}} pid {}, restarts services that exit (log {})\n", "supervisor",
                           kWidth, info.supervisor.pid, info.supervisor.log);
  std::cout << fmt::format("  {:<{}} {} (logs in {}/logs)\n", "state", kWidth, info.state_dir,
                           info.state_dir);
}

Status StartHead(StartHeadOptions head, const GlobalOptions& global) {
  if (head.start.config.empty()) head.start.config = DefaultConfig();
  ATOLL_ASSIGN_OR_RETURN(ClusterConfig config, LoadClusterConfig(head.start.config));
  head.start.plan.schedulers = head.islands;
  if (head.islands.empty()) {
    for (const auto& island : config.islands) head.start.plan.schedulers.push_back(island.name);
  }
  for (const auto& island : head.start.plan.schedulers) {
    ATOLL_RETURN_IF_ERROR(CheckName("island", island));
  }
  if (!head.rm_state.empty()) {
    head.start.plan.rm_state_file = fs::absolute(head.rm_state).lexically_normal().string();
  }
  ATOLL_ASSIGN_OR_RETURN(ClusterInfo info, StartPart(head.start, head.foreground, global));

  std::cout << "head up (config " << info.config_path << ")\n";
  PrintProcesses(info);
  PrintSecurity(info, kWidth);
  std::cout << "hosts join with: atoll start host --rm " << info.rm_endpoint << " --island ISLAND"
            << (info.keys_dir.empty() ? "" : " --keys <a copy of keys>") << "\n";
  return Attend(info, head.foreground, "");
}

// The keys a joining host's services hold: --keys (or $ATOLL_KEYS), else the config's
// security.keys_dir, else <state dir>/keys; none for a plain-text cluster.
std::string JoiningKeys(const ClusterConfig& config, const GlobalOptions& global) {
  if (!config.security.curve()) return "";
  std::string keys = global.keys_dir;
  if (keys.empty() || keys == "plain") keys = config.security.keys_dir;
  if (keys.empty()) keys = AbsoluteStateDir(global) + "/keys";
  return fs::absolute(keys).lexically_normal().string();
}

// Where the services bind unless told: every interface when the RM is on another machine
// (its peers there must reach them), else the config's bind_host.
std::string DefaultBind(const std::string& rm_endpoint, const ClusterConfig& config) {
  auto towards_rm = RoutingAddress(rm_endpoint);
  const bool remote = towards_rm.ok() && !towards_rm->starts_with("127.");
  return remote ? "0.0.0.0" : config.bind_host;
}

Status StartHost(StartHostOptions host, const GlobalOptions& global) {
  const std::string& rm = global.rm_endpoint;
  if (rm.empty()) {
    return InvalidArgument("start host joins a running cluster: name its RM with --rm EP");
  }
  if (host.start.config.empty()) host.start.config = DefaultConfig();
  ATOLL_ASSIGN_OR_RETURN(ClusterConfig config, LoadClusterConfig(host.start.config));
  if (host.host.empty()) {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0) return Unavailable("gethostname failed");
    host.host = name;
  }
  ATOLL_RETURN_IF_ERROR(CheckName("host", host.host));
  ATOLL_RETURN_IF_ERROR(CheckName("island", host.description.island));
  ATOLL_ASSIGN_OR_RETURN(const HostPlacement planned,
                         ResolveHost(config, host.host, host.description));

  const std::string keys = JoiningKeys(config, global);
  auto cluster = AskRmAsMember<proto::ClusterStatus>(rm, keys, proto::GetClusterStatus{},
                                                     std::chrono::milliseconds(kAskTimeout));
  if (!cluster.ok()) {
    return cluster.status().WithContext(
        fmt::format("asking the RM at {} as a member (keys {})", rm, keys.empty() ? "none" : keys));
  }
  StartPlan& plan = host.start.plan;
  plan.join_rm = rm;
  plan.events_in = cluster->events_in;
  plan.events_out = cluster->events_out;
  plan.hosts = {planned};
  if (plan.bind.empty()) plan.bind = DefaultBind(rm, config);
  const bool scheduled =
      std::any_of(cluster->islands.begin(), cluster->islands.end(), [&](const auto& island) {
        return island.name == planned.island && !island.scheduler_endpoint.empty();
      });
  if (!scheduled) plan.schedulers = {planned.island};
  host.start.keys_dir = keys;
  ATOLL_ASSIGN_OR_RETURN(ClusterInfo info, StartPart(host.start, host.foreground, global));

  std::cout << fmt::format("host {} joined island {} ({} {} devices) of the cluster at {}{}\n",
                           planned.host.name, planned.island, planned.host.devices,
                           planned.host.kind, info.rm_endpoint,
                           scheduled ? "" : "; the island had no scheduler: started one here");
  PrintProcesses(info);
  PrintSecurity(info, kWidth);
  return Attend(info, host.foreground, " (drains the host first)");
}

}  // namespace

void AddStartCommand(CLI::App& app, const GlobalOptions& global) {
  auto* start = app.add_subcommand(
      "start", "Start part of a cluster on this machine: its head, or a host that joins one");
  start->require_subcommand(1);

  auto head = std::make_shared<StartHeadOptions>();
  auto* head_cmd = start->add_subcommand(
      "head", "Start the RM and a scheduler per island (in the background, unless --foreground)");
  head_cmd->add_option("--island", head->islands,
                       "An island to start a scheduler for (repeat it; default: every island "
                       "of the config). Others join with their hosts.");
  head_cmd->add_option("--rm-state", head->rm_state,
                       "The RM's state file: the RM resumes from it when it exists, so that a "
                       "head restarted in place carries on (default: <state dir>/rm.state, "
                       "started afresh)");
  AddCommonOptions(head_cmd, head->start, head->foreground);
  head_cmd->callback([head, &global] {
    const Status s = StartHead(*head, global);
    if (!s.ok()) Fail(s.WithContext("start head"));
  });

  auto host = std::make_shared<StartHostOptions>();
  auto* host_cmd = start->add_subcommand(
      "host",
      "Join the cluster whose RM --rm names: start an object store and an executor (and the "
      "island's scheduler when it has none), with the keys of --keys");
  host_cmd->add_option("--island", host->description.island, "The island the host joins")
      ->required();
  host_cmd->add_option("--host", host->host, "The host's name (default: this machine's)");
  host_cmd
      ->add_option("--devices", host->description.devices,
                   "How many devices it has (default: the config's for this host, else 1)")
      ->check(CLI::Range(int64_t{1}, kMaxDevicesPerHost));
  host_cmd->add_option("--kind", host->description.kind,
                       "Their kind: cpu or sim (default: the config's for this host, else cpu)");
  AddCommonOptions(host_cmd, host->start, host->foreground);
  host_cmd->callback([host, &global] {
    const Status s = StartHost(*host, global);
    if (!s.ok()) Fail(s.WithContext("start host"));
  });
}

}  // namespace atl
