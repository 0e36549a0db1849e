#include "launcher/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/net/curve_keys.h"
#include "common/net/events.h"
#include "common/net/security.h"
#include "common/service/ready_file.h"

namespace atl {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr auto kPollPeriod = std::chrono::milliseconds(10);
constexpr auto kKillWait = std::chrono::milliseconds(2000);
constexpr size_t kLogTailLines = 15;

std::string Program(const std::string& role) { return "atoll-" + role; }

std::string Absolute(const std::string& path) {
  std::error_code ec;
  auto abs = fs::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

// An address that a local peer can connect to: a wildcard bind address ("tcp://*:5550",
// "tcp://0.0.0.0:5550") becomes loopback.
std::string Connectable(std::string endpoint) {
  for (const std::string wildcard : {"tcp://*:", "tcp://0.0.0.0:"}) {
    if (endpoint.rfind(wildcard, 0) == 0) {
      return "tcp://127.0.0.1:" + endpoint.substr(wildcard.size());
    }
  }
  return endpoint;
}

std::string LogTail(const std::string& log) {
  const std::string tail = proc::TailFile(log, kLogTailLines);
  if (tail.empty()) return "its log " + log + " is empty";
  return "its log " + log + " ends with:\n" + tail;
}

// The value of `key` in a service's ready file, or InvalidArgument naming what is missing.
Result<std::string> ReadyValue(const ProcessInfo& p, const std::string& key) {
  auto it = p.endpoints.find(key);
  if (it == p.endpoints.end() || it->second.empty()) {
    return InvalidArgument(p.name + "'s ready file has no '" + key + "' key");
  }
  return Connectable(it->second);
}

bool RunsItsProgram(const ProcessInfo& p) {
  return proc::IsProgram(static_cast<pid_t>(p.pid), fs::path(p.program).filename().string());
}

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Waits up to `timeout` for `pid` to end; true when it did.
bool AwaitEnd(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (proc::IsRunning(pid) && Clock::now() < deadline) std::this_thread::sleep_for(kPollPeriod);
  return !proc::IsRunning(pid);
}

// How a service started again binds what its first start bound: each ready-file key and the
// option that asks for that address.
const std::vector<std::pair<std::string, std::string>>& RebindOptions(const std::string& role) {
  static const std::map<std::string, std::vector<std::pair<std::string, std::string>>> kByRole = {
      {"rm",
       {{"endpoint", "--endpoint"}, {"events_in", "--events-in"}, {"events_out", "--events-out"}}},
      {"objectstore", {{"endpoint", "--endpoint"}}},
      {"executor", {{"control", "--control-endpoint"}, {"data", "--data-endpoint"}}},
      {"scheduler", {{"endpoint", "--endpoint"}}},
      // atoll-simhosts binds free ports again: its hosts register anew with the RM.
  };
  static const std::vector<std::pair<std::string, std::string>> kNone;
  auto it = kByRole.find(role);
  return it == kByRole.end() ? kNone : it->second;
}

// Holds an exclusive flock on <state_dir>/lock while it lives, so that two `atoll up` (or an
// `up` and a `down`) on one state dir never interleave.
class StateDirLock {
 public:
  ~StateDirLock() {
    if (fd_ >= 0) close(fd_);
  }
  Status Acquire(const std::string& state_dir) {
    const std::string path = state_dir + "/lock";
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return Unavailable("cannot open " + path);
    if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      return FailedPrecondition("another atoll command is starting or stopping a cluster in " +
                                state_dir);
    }
    return Status::Ok();
  }

 private:
  int fd_ = -1;
};

}  // namespace

LocalCluster::LocalCluster(LocalClusterOptions options) : options_(std::move(options)) {
  if (options_.state_dir.empty()) options_.state_dir = DefaultStateDir();
  if (options_.bin_dir.empty()) options_.bin_dir = proc::ExecutableDir();
  options_.state_dir = Absolute(options_.state_dir);
  options_.bin_dir = Absolute(options_.bin_dir);
  if (!options_.config_path.empty()) options_.config_path = Absolute(options_.config_path);
}

LocalCluster::~LocalCluster() {
  if (!detached_) static_cast<void>(Stop());
}

ProcessInfo LocalCluster::Plan(const std::string& role, const std::string& target) const {
  ProcessInfo p;
  p.role = role;
  p.target = target;
  p.name = target.empty() ? role : role + "-" + target;
  p.program = options_.bin_dir + "/" + Program(role);
  p.log = options_.state_dir + "/logs/" + p.name + ".log";
  return p;
}

bool LocalCluster::Simulated(const std::string& name) const {
  for (const auto& [first, hosts] : sim_groups_) {
    if (Contains(hosts, name)) return true;
  }
  return false;
}

std::vector<ProcessInfo> LocalCluster::PlanObjectStores() const {
  std::vector<ProcessInfo> out;
  for (const auto& planned : plan_.hosts) {
    if (!Simulated(planned.host.name)) out.push_back(Plan("objectstore", planned.host.name));
  }
  return out;
}

std::vector<ProcessInfo> LocalCluster::PlanExecutors() const {
  std::vector<ProcessInfo> out;
  for (const auto& planned : plan_.hosts) {
    if (!Simulated(planned.host.name)) out.push_back(Plan("executor", planned.host.name));
  }
  return out;
}

std::vector<ProcessInfo> LocalCluster::PlanSimHosts() const {
  std::vector<ProcessInfo> out;
  for (const auto& [first, hosts] : sim_groups_) out.push_back(Plan("simhosts", first));
  return out;
}

std::vector<ProcessInfo> LocalCluster::PlanSchedulers() const {
  std::vector<ProcessInfo> out;
  for (const auto& island : plan_.schedulers) out.push_back(Plan("scheduler", island));
  return out;
}

const HostPlacement* LocalCluster::PlannedHostNamed(const std::string& name) const {
  for (const auto& planned : plan_.hosts) {
    if (planned.host.name == name) return &planned;
  }
  return nullptr;
}

std::vector<std::string> LocalCluster::Argv(const Child& child) const {
  const ProcessInfo& p = child.info;
  std::vector<std::string> argv = {p.program, "--config", options_.config_path};
  if (p.role == "rm") {
    argv.insert(argv.end(), {"--state-file", RmStateFile()});
  } else if (p.role == "objectstore" || p.role == "executor") {
    argv.insert(argv.end(),
                {"--host", p.target, "--rm", info_.rm_endpoint, "--events-in", info_.events_in});
    // Said in full, so that a host the config does not name can start.
    if (const HostPlacement* planned = PlannedHostNamed(p.target)) {
      argv.insert(argv.end(),
                  {"--island", planned->island, "--devices", std::to_string(planned->host.devices),
                   "--kind", planned->host.kind});
    }
    if (p.role == "executor") {
      const Child* store = FindChild("objectstore-" + p.target);
      argv.insert(argv.end(),
                  {"--store", store ? Connectable(store->info.endpoints.at("endpoint")) : ""});
    }
  } else if (p.role == "simhosts") {
    std::string hosts;
    for (const auto& name : sim_groups_.at(p.target)) hosts += (hosts.empty() ? "" : ",") + name;
    argv.insert(argv.end(),
                {"--hosts", hosts, "--rm", info_.rm_endpoint, "--events-in", info_.events_in});
  } else if (p.role == "scheduler") {
    argv.insert(argv.end(),
                {"--island", p.target, "--rm", info_.rm_endpoint, "--events-in", info_.events_in});
  }
  // Started before (its ready file was read): it comes back where the rest of the cluster
  // knows it, so that their connections (ZeroMQ reconnects on its own) reach it again. It
  // binds what it bound (bind_<key>, when that is not what it advertises, such as 0.0.0.0).
  for (const auto& [key, option] : RebindOptions(p.role)) {
    auto it = p.endpoints.find("bind_" + key);
    if (it == p.endpoints.end()) it = p.endpoints.find(key);
    if (it != p.endpoints.end()) argv.insert(argv.end(), {option, it->second});
  }
  if (!keys_dir_.empty()) argv.insert(argv.end(), {"--keys", keys_dir_});
  if (p.role == "objectstore" || p.role == "simhosts") {
    argv.insert(argv.end(), {"--checkpoint-root", checkpoint_root()});
  }
  if (!plan_.bind.empty()) argv.insert(argv.end(), {"--bind", plan_.bind});
  if (!plan_.advertise.empty()) argv.insert(argv.end(), {"--advertise", plan_.advertise});
  argv.insert(argv.end(), {"--ready-file", child.ready_path});
  if (!options_.log_level.empty()) argv.insert(argv.end(), {"--log-level", options_.log_level});
  return argv;
}

Status LocalCluster::Start() {
  if (!children_.empty() || wrote_info_) return FailedPrecondition("LocalCluster::Start twice");
  if (options_.config_path.empty()) return InvalidArgument("no cluster config given");
  ATOLL_ASSIGN_OR_RETURN(config_, LoadClusterConfig(options_.config_path));
  plan_ = options_.plan ? *options_.plan : WholeCluster(config_);
  sim_groups_.clear();
  for (auto& group : SimHostGroups(plan_, config_)) {
    const std::string first = group.front();
    sim_groups_.emplace(first, std::move(group));
  }
  if (!plan_.starts_rm() && plan_.hosts.empty()) {
    return InvalidArgument("a start that joins the RM at " + plan_.join_rm + " must start a host");
  }

  std::error_code ec;
  for (const char* sub : {"", "/logs", "/run"}) {
    fs::create_directories(options_.state_dir + sub, ec);
    if (ec) return Unavailable("cannot create " + options_.state_dir + sub + ": " + ec.message());
  }
  StateDirLock lock;
  ATOLL_RETURN_IF_ERROR(lock.Acquire(options_.state_dir));
  ATOLL_RETURN_IF_ERROR(CheckNoRunningCluster(options_.state_dir, plan_.RecordName()));
  std::vector<const char*> roles;
  if (plan_.starts_rm()) roles.push_back("rm");
  if (!PlanExecutors().empty()) roles.insert(roles.end(), {"objectstore", "executor"});
  if (!sim_groups_.empty()) roles.push_back("simhosts");
  if (!plan_.schedulers.empty()) roles.push_back("scheduler");
  for (const char* role : roles) {
    const std::string program = options_.bin_dir + "/" + Program(role);
    if (access(program.c_str(), X_OK) != 0) {
      return NotFound(Program(role) + " not found in " + options_.bin_dir +
                      " (build it with `make " + Program(role) +
                      "`, or point --bin-dir at the directory that holds it)");
    }
  }

  ATOLL_RETURN_IF_ERROR(MakeKeys());
  info_ = ClusterInfo{};
  info_.state_dir = options_.state_dir;
  info_.record = plan_.RecordName();
  info_.config_path = options_.config_path;
  info_.keys_dir = keys_dir_;
  info_.started_at_us = NowMicros();
  info_.supervisor = options_.supervisor;
  info_.rm_endpoint = plan_.join_rm;
  info_.events_in = plan_.events_in;
  info_.events_out = plan_.events_out;

  Status status = plan_.starts_rm() ? StartRm() : Status::Ok();
  if (status.ok()) status = StartStage(PlanObjectStores());
  if (status.ok()) {
    for (const auto& c : children_) {
      if (c.info.role == "objectstore" && status.ok()) {
        status = ReadyValue(c.info, "endpoint").status();
      }
    }
  }
  if (status.ok()) status = StartStage(PlanExecutors());
  if (status.ok()) status = StartStage(PlanSimHosts());
  if (status.ok()) status = StartStage(PlanSchedulers());
  if (status.ok()) {
    status = WriteRecord();
    wrote_info_ = status.ok();
  }
  if (!status.ok()) {
    static_cast<void>(Stop());
    return status;
  }
  return Status::Ok();
}

std::string LocalCluster::RmStateFile() const {
  return plan_.rm_state_file.empty() ? options_.state_dir + "/rm.state" : plan_.rm_state_file;
}

Status LocalCluster::StartRm() {
  // A new cluster starts from nothing, whatever an earlier one in this dir left; a state
  // file the plan names is the cluster's own, to resume from.
  if (plan_.rm_state_file.empty()) {
    std::error_code ec;
    fs::remove(RmStateFile(), ec);
  }
  ATOLL_RETURN_IF_ERROR(StartStage({Plan("rm", "")}));
  const ProcessInfo& rm = children_.front().info;
  ATOLL_ASSIGN_OR_RETURN(info_.rm_endpoint, ReadyValue(rm, "endpoint"));
  ATOLL_ASSIGN_OR_RETURN(info_.events_in, ReadyValue(rm, "events_in"));
  ATOLL_ASSIGN_OR_RETURN(info_.events_out, ReadyValue(rm, "events_out"));
  return Status::Ok();
}

Status LocalCluster::MakeKeys() {
  if (!config_.security.curve()) return Status::Ok();
  const std::string& named =
      !options_.keys_dir.empty() ? options_.keys_dir : config_.security.keys_dir;
  keys_dir_ = Absolute(named.empty() ? options_.state_dir + "/keys" : named);
  if (!plan_.starts_rm()) {
    // Services that join hold the keys of the cluster they join, which made them.
    auto held = net::ServiceCredentials(keys_dir_);
    if (held.ok()) return Status::Ok();
    return FailedPrecondition("joining the cluster takes its key pair, and " + keys_dir_ +
                              " holds none (" + held.status().message() +
                              "); copy the head's keys folder here, or name it with --keys");
  }
  auto made = net::EnsureClusterKeys(keys_dir_);
  if (!made.ok()) return made.status().WithContext("cluster keys");
  // Keys made before (`atoll keygen`, an earlier start) are kept as they are: they may be
  // read-only (a Kubernetes Secret), and a client key removed from them stays removed.
  if (!*made) return Status::Ok();
  return net::EnsureClientKey(keys_dir_, "default").status().WithContext("client keys");
}

Status LocalCluster::StartStage(const std::vector<ProcessInfo>& stage) {
  std::vector<size_t> started;
  for (const auto& plan : stage) {
    Child child;
    child.info = plan;
    child.ready_path = options_.state_dir + "/run/" + plan.name + ".ready";
    child.backoff = RestartBackoff(options_.restart_backoff);
    ATOLL_RETURN_IF_ERROR(SpawnChild(child).WithContext("starting " + plan.name));
    children_.push_back(std::move(child));
    started.push_back(children_.size() - 1);
  }
  std::vector<Child*> waiting;
  for (size_t i : started) waiting.push_back(&children_[i]);
  return WaitReady(std::move(waiting));
}

Status LocalCluster::SpawnChild(Child& child) {
  std::error_code ec;
  fs::remove(child.ready_path, ec);  // a stale one from an earlier start would mislead us
  proc::SpawnOptions spawn;
  spawn.argv = Argv(child);
  spawn.log_path = child.info.log;
  spawn.append_log = child.exit.has_value();  // started before: keep what that one logged
  spawn.detach = options_.detach;
  if (child.info.role == "executor" || child.info.role == "simhosts") {
    // Their devices multiply on threads of their own, with OpenBLAS set to one thread
    // (kernels/matmul_threads.h). Said before it loads: otherwise it starts a thread per
    // core that spins in sched_yield for about 80 ms of CPU, taken from the services
    // starting beside it.
    spawn.env = {"OPENBLAS_NUM_THREADS=1"};
  }
  ATOLL_ASSIGN_OR_RETURN(pid_t pid, proc::Spawn(spawn));
  child.pid = pid;
  child.info.pid = pid;
  child.exit.reset();
  child.signalled = false;
  child.started = Clock::now();
  return Status::Ok();
}

bool LocalCluster::TakeReadyFile(Child& child) {
  if (access(child.ready_path.c_str(), F_OK) != 0) return false;
  auto values = ReadReadyFile(child.ready_path);
  if (!values.ok()) return false;
  values->erase("pid");
  for (auto& [key, value] : *values) child.info.endpoints[key] = std::move(value);
  return true;
}

void LocalCluster::Reaped(Child& child, const proc::ExitInfo& exit) {
  child.exit = exit;
  child.pid = 0;
  if (child.info.role != "objectstore" && child.info.role != "simhosts") return;
  // Its arenas ("arena", or "arena_<host>" for each of atoll-simhosts' hosts). ENOENT: the
  // store unlinked it itself, as it does when it exits cleanly.
  for (const auto& [key, value] : child.info.endpoints) {
    if (key.starts_with("arena")) shm_unlink(value.c_str());
  }
}

void LocalCluster::ScheduleRestart(Child& child, Clock::time_point now, const std::string& why) {
  const milliseconds delay = child.backoff.OnExit(child.started, now);
  child.restart_at = now + delay;
  child.awaiting_ready = false;
  spdlog::warn("{} (pid {}) {}; starting it again in {} ms (restarts so far: {}; log {})",
               child.info.name, child.info.pid, why, delay.count(), child.info.restarts,
               child.info.log);
  child.info.pid = 0;  // cluster.toml says it is down until it runs again
}

Status LocalCluster::WriteRecord() {
  info_.processes.clear();
  for (const auto& c : children_) info_.processes.push_back(c.info);
  return WriteClusterInfo(info_);
}

Status LocalCluster::Supervise() {
  if (!wrote_info_ || stopped_) {
    return FailedPrecondition("Supervise() needs a cluster that has started and not stopped");
  }
  const auto now = Clock::now();
  bool changed = false;
  for (auto& c : children_) {
    if (c.pid != 0) {
      ATOLL_ASSIGN_OR_RETURN(auto exit, proc::TryReap(c.pid));
      if (exit) {
        Reaped(c, *exit);
        changed = true;
      } else if (c.awaiting_ready && TakeReadyFile(c)) {
        c.awaiting_ready = false;
        changed = true;
        spdlog::info("{} is back (pid {}, restart {})", c.info.name, c.pid, c.info.restarts);
      } else if (c.awaiting_ready && now - c.started >= options_.ready_timeout) {
        // Reaped and scheduled again by a later pass, as a crash.
        spdlog::warn("{} (pid {}) was not ready within {} ms of its restart; killing it",
                     c.info.name, c.pid, options_.ready_timeout.count());
        kill(c.pid, SIGKILL);
      }
    }
    if (c.pid != 0 || !c.exit || c.signalled) continue;
    // It ended on its own (reaped here or by any other method that reaps).
    if (!c.restart_at) {
      ScheduleRestart(c, now, c.exit->Describe());
      changed = true;
    } else if (now >= *c.restart_at) {
      c.restart_at.reset();
      const Status spawned = SpawnChild(c);
      if (spawned.ok()) {
        ++c.info.restarts;
        c.awaiting_ready = true;
      } else {
        ScheduleRestart(c, now, "could not be started again (" + spawned.message() + ")");
      }
      changed = true;
    }
  }
  return changed ? WriteRecord() : Status::Ok();
}

Status LocalCluster::WaitReady(std::vector<Child*> children) {
  const auto deadline = Clock::now() + options_.ready_timeout;
  while (!children.empty()) {
    for (auto it = children.begin(); it != children.end();) {
      Child& c = **it;
      if (TakeReadyFile(c)) {
        it = children.erase(it);
        continue;
      }
      ATOLL_ASSIGN_OR_RETURN(auto exit, proc::TryReap(c.pid));
      if (exit) {
        Reaped(c, *exit);
        return Unavailable(c.info.name + " (" + c.info.program + ") " + exit->Describe() +
                           " before it was ready; " + LogTail(c.info.log));
      }
      ++it;
    }
    if (children.empty()) break;
    if (Clock::now() >= deadline) {
      const Child& c = *children.front();
      return DeadlineExceeded(c.info.name + " was not ready within " +
                              std::to_string(options_.ready_timeout.count()) +
                              " ms (no ready file " + c.ready_path + "); " + LogTail(c.info.log));
    }
    std::this_thread::sleep_for(kPollPeriod);
  }
  return Status::Ok();
}

void LocalCluster::ReapAll() {
  for (auto& c : children_) {
    if (c.pid == 0) continue;
    auto exit = proc::TryReap(c.pid);
    if (!exit.ok()) {
      c.pid = 0;  // not our child any more: nothing left to reap
    } else if (*exit) {
      Reaped(c, **exit);
    }
  }
}

Status LocalCluster::Stop() {
  if (stopped_) return stop_status_;
  ReapAll();
  for (auto it = children_.rbegin(); it != children_.rend(); ++it) {
    if (it->pid != 0) kill(it->pid, SIGTERM);
  }
  auto all_reaped = [&] {
    return std::all_of(children_.begin(), children_.end(),
                       [](const Child& c) { return c.pid == 0; });
  };
  const auto deadline = Clock::now() + options_.stop_timeout;
  while (!all_reaped() && Clock::now() < deadline) {
    std::this_thread::sleep_for(kPollPeriod);
    ReapAll();
  }
  for (auto& c : children_) {
    if (c.pid != 0) {
      kill(c.pid, SIGKILL);
      c.killed = true;
    }
  }
  const auto kill_deadline = Clock::now() + kKillWait;
  while (!all_reaped() && Clock::now() < kill_deadline) {
    std::this_thread::sleep_for(kPollPeriod);
    ReapAll();
  }

  std::string issues;
  for (const auto& c : children_) {
    std::string issue;
    if (c.pid != 0) {
      issue = c.info.name + " (pid " + std::to_string(c.pid) + ") survived SIGKILL";
    } else if (c.killed) {
      issue = c.info.name + " did not exit within " +
              std::to_string(options_.stop_timeout.count()) + " ms of SIGTERM and was killed";
    } else if (c.exit && !c.exit->clean() && !c.signalled) {
      issue = c.info.name + " " + c.exit->Describe();
    }
    if (!issue.empty()) issues += "\n  " + issue + " (log: " + c.info.log + ")";
  }
  for (const auto& c : children_) {
    std::error_code ec;
    fs::remove(c.ready_path, ec);
  }
  if (wrote_info_) static_cast<void>(RemoveClusterInfo(options_.state_dir, info_.record));
  stopped_ = true;
  stop_status_ =
      issues.empty() ? Status::Ok() : Internal("local cluster did not stop cleanly:" + issues);
  return stop_status_;
}

LocalCluster::Child* LocalCluster::FindChild(const std::string& name) {
  for (auto& c : children_) {
    if (c.info.name == name) return &c;
  }
  return nullptr;
}

const LocalCluster::Child* LocalCluster::FindChild(const std::string& name) const {
  for (const auto& c : children_) {
    if (c.info.name == name) return &c;
  }
  return nullptr;
}

Result<pid_t> LocalCluster::Pid(const std::string& name) const {
  const Child* c = FindChild(name);
  if (c == nullptr) return NotFound("no service '" + name + "' in this cluster");
  if (c->pid == 0) return NotFound(name + " has already ended");
  return c->pid;
}

Status LocalCluster::Signal(const std::string& name, int signal) {
  ATOLL_ASSIGN_OR_RETURN(pid_t pid, Pid(name));
  FindChild(name)->signalled = true;
  if (kill(pid, signal) != 0) return Unavailable("kill " + name + ": " + std::strerror(errno));
  return Status::Ok();
}

Status LocalCluster::Restart(const std::string& name, int signal) {
  Child* c = FindChild(name);
  if (c == nullptr) return NotFound("no service '" + name + "' in this cluster");
  if (c->pid != 0) {
    ATOLL_RETURN_IF_ERROR(Signal(name, signal));
    const auto deadline = Clock::now() + options_.stop_timeout;
    while (c->pid != 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(kPollPeriod);
      ReapAll();
    }
    if (c->pid != 0) {
      kill(c->pid, SIGKILL);
      const auto kill_deadline = Clock::now() + kKillWait;
      while (c->pid != 0 && Clock::now() < kill_deadline) {
        std::this_thread::sleep_for(kPollPeriod);
        ReapAll();
      }
      if (c->pid != 0) return Unavailable(name + " survived SIGKILL");
    }
  }
  c->restart_at.reset();
  ATOLL_RETURN_IF_ERROR(SpawnChild(*c).WithContext("restarting " + name));
  return WaitReady({c}).WithContext("restarting " + name);
}

Result<std::optional<proc::ExitInfo>> LocalCluster::ExitStatus(const std::string& name) {
  Child* c = FindChild(name);
  if (c == nullptr) return NotFound("no service '" + name + "' in this cluster");
  ReapAll();
  return c->exit;
}

Status CheckNoRunningCluster(const std::string& state_dir, const std::string& record) {
  auto existing = ReadClusterInfo(state_dir, record);
  if (!existing.ok()) return Status::Ok();  // none, or unreadable: nothing we could stop
  const auto running = RunningProcesses(*existing);
  if (running.empty()) return Status::Ok();  // stale: every recorded process is gone
  const std::string what = record == kHeadRecord ? "a cluster is" : record + " is";
  return FailedPrecondition(what + " already running from " + state_dir + " (rm " +
                            existing->rm_endpoint + ", " + std::to_string(running.size()) +
                            " processes alive); run `atoll stop` first");
}

std::vector<ProcessInfo> RunningProcesses(const ClusterInfo& info) {
  std::vector<ProcessInfo> out;
  for (const auto& p : info.processes) {
    if (RunsItsProgram(p)) out.push_back(p);
  }
  return out;
}

namespace {

// The first step of StopRecordedCluster: the supervisor (see there).
Status StopSupervisor(const ClusterInfo& info, std::chrono::milliseconds timeout,
                      StopSummary& summary) {
  if (info.supervisor.pid == 0) return Status::Ok();
  const auto supervisor = static_cast<pid_t>(info.supervisor.pid);
  if (!RunsItsProgram(info.supervisor)) {
    summary.supervisor = "not running";
    return Status::Ok();
  }
  const auto running = RunningProcesses(info);
  kill(supervisor, SIGTERM);
  summary.supervisor = "stopped";
  if (!AwaitEnd(supervisor, timeout)) {
    if (RunsItsProgram(info.supervisor)) kill(supervisor, SIGKILL);
    summary.supervisor = "killed";
    if (!AwaitEnd(supervisor, kKillWait)) {
      return Unavailable("the supervisor (pid " + std::to_string(supervisor) +
                         ") still runs after SIGKILL");
    }
  }
  for (const auto& p : running) {
    if (!proc::IsRunning(static_cast<pid_t>(p.pid))) summary.stopped.push_back(p.name);
  }
  return Status::Ok();
}

}  // namespace

Result<StopSummary> StopRecordedCluster(const ClusterInfo& recorded,
                                        std::chrono::milliseconds timeout) {
  StopSummary summary;
  ATOLL_RETURN_IF_ERROR(StopSupervisor(recorded, timeout, summary));
  // A supervisor that could not finish (killed) may have restarted services since `recorded`
  // was read: its last cluster.toml names their pids. One that finished removed the file.
  auto latest = ReadClusterInfo(recorded.state_dir, recorded.record);
  const ClusterInfo& info = latest.ok() ? *latest : recorded;

  std::vector<ProcessInfo> targets;
  const auto running = RunningProcesses(info);
  for (auto it = info.processes.rbegin(); it != info.processes.rend(); ++it) {
    if (Contains(summary.stopped, it->name)) continue;
    const bool alive = std::any_of(running.begin(), running.end(),
                                   [&](const ProcessInfo& r) { return r.name == it->name; });
    if (!alive) {
      summary.not_running.push_back(it->name);
      continue;
    }
    kill(static_cast<pid_t>(it->pid), SIGTERM);
    targets.push_back(*it);
  }
  auto still_running = [&] {
    std::vector<ProcessInfo> out;
    for (const auto& p : targets) {
      if (proc::IsRunning(static_cast<pid_t>(p.pid))) out.push_back(p);
    }
    return out;
  };
  const auto deadline = Clock::now() + timeout;
  while (!still_running().empty() && Clock::now() < deadline)
    std::this_thread::sleep_for(kPollPeriod);
  for (const auto& p : still_running()) {
    // Checked again: the pid may have ended and been recycled during the wait.
    if (RunsItsProgram(p)) {
      kill(static_cast<pid_t>(p.pid), SIGKILL);
      summary.killed.push_back(p.name);
    }
  }
  const auto kill_deadline = Clock::now() + kKillWait;
  while (!still_running().empty() && Clock::now() < kill_deadline) {
    std::this_thread::sleep_for(kPollPeriod);
  }
  const auto survivors = still_running();
  for (const auto& p : targets) {
    const bool survived = std::any_of(survivors.begin(), survivors.end(),
                                      [&](const ProcessInfo& s) { return s.name == p.name; });
    if (!survived && !Contains(summary.killed, p.name)) summary.stopped.push_back(p.name);
  }
  if (!survivors.empty()) {
    std::string names;
    for (const auto& s : survivors) names += " " + s.name + " (pid " + std::to_string(s.pid) + ")";
    return Unavailable("still running after SIGKILL:" + names);
  }
  for (const auto& p : info.processes) {
    std::error_code ec;
    fs::remove(info.state_dir + "/run/" + p.name + ".ready", ec);
  }
  ATOLL_RETURN_IF_ERROR(RemoveClusterInfo(info.state_dir, info.record));
  return summary;
}

}  // namespace atl
