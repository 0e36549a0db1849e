// LocalCluster: atoll services as processes on this machine, started from a cluster config
// (config/local.toml) and a StartPlan (start_plan.h): the RM first (unless the plan joins a
// running one), then one object store per host, one executor per host (given its host's
// store), one atoll-simhosts process per group of simulated hosts when the config says
// `sim_hosts_per_process` (SimHostGroups), one scheduler per island. By default the plan is the
// whole config; `atoll up`, `atoll start head` and `atoll start host` each run one under their
// supervisor, and every end-to-end test starts one.
//
// Supervision: call Supervise() periodically (`atoll supervise`, cli/supervise.cc, does every
// 50 ms) and a service that exits on its own is started again after a RestartBackoff delay
// (restart_backoff.h), on the endpoints its first start bound, so that every peer's ZeroMQ
// connection finds it again; its restart count and new pid go to cluster.toml.
//
// Files under the state directory:
//   <state_dir>/<record>.toml       where everything listens, pids, restarts (cluster_info.h):
//                                   cluster.toml for a plan that starts the RM, else
//                                   host-<name>.toml (StartPlan::RecordName)
//   <state_dir>/logs/<name>.log     each service's stdout and stderr
//   <state_dir>/run/<name>.ready    each service's ready file (common/ready_file.h)
//   <state_dir>/rm.state            the RM's state, kept across RM restarts (Restart);
//                                   the plan may name another file (rm_state_file)
//   <state_dir>/checkpoints/        the object stores' checkpoint root, unless the options
//                                   or the config (checkpoints.root) name another; kept
//                                   across starts
//   <state_dir>/keys/               the CURVE keys, unless the config or the options name
//                                   another place (common/net/curve_keys.h); kept across
//                                   starts; made by a plan that starts the RM, required
//                                   (copied from the head) by one that joins
// Service names: "rm", "objectstore-<host>", "executor-<host>", "scheduler-<island>",
// "simhosts-<the group's first host>".
//
// Example (a test):
//   LocalClusterOptions options;
//   options.config_path = ATOLL_SOURCE_DIR "/config/test.toml";
//   options.state_dir = temp_dir;
//   options.bin_dir = ATOLL_BIN_DIR;
//   LocalCluster cluster(options);
//   ASSERT_TRUE(cluster.Start().ok());
//   ... connect to cluster.info().rm_endpoint ...
//   // the destructor stops every process
//
// Not thread-safe: use one LocalCluster from one thread (in non-detached mode its children
// get SIGTERM when the thread that started them exits).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "atoll/status.h"
#include "common/service/config.h"
#include "launcher/cluster_info.h"
#include "launcher/process.h"
#include "launcher/restart_backoff.h"
#include "launcher/start_plan.h"

namespace atl {

struct LocalClusterOptions {
  std::string config_path;  // required
  // What to start; empty: WholeCluster(the config).
  std::optional<StartPlan> plan;
  // The CURVE keys directory; empty: the config's security.keys_dir, else <state_dir>/keys.
  std::string keys_dir;
  std::string state_dir;  // empty: DefaultStateDir()
  // The object stores' checkpoint root; empty: the config's checkpoints.root, else
  // <state_dir>/checkpoints.
  std::string checkpoint_root;
  std::string bin_dir;    // where atoll-rm & co. are; empty: the running executable's dir
  std::string log_level;  // passed to every service with --log-level; empty: the config's
  // How long each service may take from its start to its ready file.
  std::chrono::milliseconds ready_timeout{20000};
  // How long Stop() waits after SIGTERM before it sends SIGKILL.
  std::chrono::milliseconds stop_timeout{5000};
  // true: the services run in their own session and outlive this process (`atoll up`);
  // call Detach() once Start() succeeded. false: they are bound to this process.
  bool detach = false;
  // How long Supervise() waits before restarting a service that exited.
  BackoffOptions restart_backoff;
  // The process that supervises this cluster, recorded in cluster.toml so that `atoll down`
  // stops it first; pid 0: none (a test's or an example's own cluster).
  ProcessInfo supervisor;
};

class LocalCluster {
 public:
  explicit LocalCluster(LocalClusterOptions options);
  // Stops every process still running, unless Detach() was called.
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // Starts every service of the plan and waits for each one's ready file, then writes its
  // record. Fails, having stopped whatever it started, when:
  //  - the config cannot be loaded, a binary is missing or the plan joins an RM with no
  //    host to start (InvalidArgument / NotFound);
  //  - the plan joins an RM and the keys directory holds no cluster key pair
  //    (FailedPrecondition);
  //  - the state dir's record names processes that still run (FailedPrecondition:
  //    "a cluster is already running ...; run `atoll down`");
  //  - a service exits before it is ready (Unavailable) or is not ready within
  //    ready_timeout (DeadlineExceeded); the message names the service and its log file
  //    and quotes the log's last lines.
  // Call once.
  Status Start();

  // SIGTERM to every process (last started first), waits up to stop_timeout for all of them,
  // SIGKILLs the rest, reaps them all and removes cluster.toml and the ready files. Returns OK when
  // every process exited with status 0; otherwise Internal, listing each one that crashed, exited
  // non-zero or had to be killed. Idempotent.
  Status Stop();

  // Leaves the processes running when this object goes away (`atoll up`).
  void Detach() { detached_ = true; }

  // Valid after a successful Start().
  const ClusterInfo& info() const { return info_; }
  const ClusterConfig& config() const { return config_; }
  // The CURVE keys directory every service was given (security.keys_dir, else
  // <state_dir>/keys, made with a "default" client key on first start), or "plain" when the
  // config's security.mode is: what a client of this cluster passes as
  // ClientOptions::keys_dir (or $ATOLL_KEYS).
  std::string keys_dir() const { return keys_dir_.empty() ? "plain" : keys_dir_; }
  // Where its object stores keep checkpoints (given to each as --checkpoint-root).
  std::string checkpoint_root() const {
    if (!options_.checkpoint_root.empty()) return options_.checkpoint_root;
    return config_.checkpoint_root.empty() ? options_.state_dir + "/checkpoints"
                                           : config_.checkpoint_root;
  }

  // The pid of the service `name`; NotFound if there is no such service or it has been
  // reaped. For fault-injection tests: Signal(name, SIGKILL) kills one service.
  Result<pid_t> Pid(const std::string& name) const;
  Status Signal(const std::string& name, int signal);
  // How the service `name` ended, once it has (reaping it); empty while it runs.
  Result<std::optional<proc::ExitInfo>> ExitStatus(const std::string& name);
  // Stops the service `name` (`signal`, then SIGKILL after stop_timeout), waits for it to
  // end, and starts it again with the same arguments, waiting for its ready file. It comes
  // back on the endpoints it had (the RM with its state file).
  Status Restart(const std::string& name, int signal);

  // One pass of supervision; returns at once. Reaps every service that exited although
  // nothing asked it to (Signal(), Restart() and Stop() do) and schedules its restart after
  // its backoff delay; starts the services whose delay has passed (counting a restart);
  // takes the ready file of a restarted one, or SIGKILLs it when it is not ready within
  // ready_timeout (a crash like any other). A store's arena is unlinked once its store is
  // reaped: the dead process cannot, and the restarted store makes a new one (arena names
  // carry the creator's pid, so the new name never collides with a stale one).
  // Rewrites cluster.toml whenever a pid, restart count or ready file changed; fails only
  // when it cannot (Unavailable), or before Start() or after Stop() (FailedPrecondition).
  Status Supervise();

 private:
  using Clock = std::chrono::steady_clock;

  struct Child {
    ProcessInfo info;
    std::string ready_path;
    pid_t pid = 0;                       // 0 once reaped
    std::optional<proc::ExitInfo> exit;  // set when reaped
    bool killed = false;                 // needed SIGKILL in Stop()
    bool signalled = false;              // Signal() was used: its exit is expected
    // Supervision:
    Clock::time_point started;                    // its latest start
    RestartBackoff backoff;                       // delays between its restarts
    std::optional<Clock::time_point> restart_at;  // exited: when to start it again
    bool awaiting_ready = false;                  // restarted; its ready file not read yet
  };

  // Makes the keys the config's security needs, unless they exist (keys_dir_): the
  // cluster's key pair and, with it, the client key "default".
  Status MakeKeys();
  // Starts the RM (the first service) and records its endpoints.
  Status StartRm();
  // Where the RM keeps its state (StartPlan::rm_state_file).
  std::string RmStateFile() const;
  Status StartStage(const std::vector<ProcessInfo>& stage);
  // Starts (or starts again) `child` with Argv(child), its old ready file removed.
  Status SpawnChild(Child& child);
  // Reads the child's ready file into its endpoints; false while there is none.
  bool TakeReadyFile(Child& child);
  // Records how the child ended; a store's arena goes with it (see Supervise()).
  void Reaped(Child& child, const proc::ExitInfo& exit);
  // Logs why the child ended and when it starts again, after its backoff delay.
  void ScheduleRestart(Child& child, Clock::time_point now, const std::string& why);
  // Writes cluster.toml from the children's current state.
  Status WriteRecord();
  Status WaitReady(std::vector<Child*> children);
  std::vector<ProcessInfo> PlanObjectStores() const;
  std::vector<ProcessInfo> PlanExecutors() const;
  std::vector<ProcessInfo> PlanSchedulers() const;
  std::vector<ProcessInfo> PlanSimHosts() const;
  // True when host `name` runs in an atoll-simhosts process.
  bool Simulated(const std::string& name) const;
  ProcessInfo Plan(const std::string& role, const std::string& target) const;
  // The plan's host `name`; nullptr when it has none of that name.
  const HostPlacement* PlannedHostNamed(const std::string& name) const;
  std::vector<std::string> Argv(const Child& child) const;
  void ReapAll();
  Child* FindChild(const std::string& name);
  const Child* FindChild(const std::string& name) const;

  LocalClusterOptions options_;
  ClusterConfig config_;
  StartPlan plan_;
  ClusterInfo info_;
  std::string keys_dir_;
  std::vector<Child> children_;  // in start order
  // The atoll-simhosts processes' hosts, by the group's first host (its target).
  std::map<std::string, std::vector<std::string>> sim_groups_;
  bool detached_ = false;
  bool wrote_info_ = false;
  bool stopped_ = false;
  Status stop_status_;
};

// FailedPrecondition "a cluster is already running from <state_dir> ...; run `atoll down`
// first" (for a host's record: "host NAME already runs from ...") when the state dir's
// record names processes that still run; OK otherwise.
Status CheckNoRunningCluster(const std::string& state_dir, const std::string& record = kHeadRecord);

// What StopRecordedCluster did.
struct StopSummary {
  std::string supervisor;            // "stopped", "killed", "not running"; "" when none is recorded
  std::vector<std::string> stopped;  // ended after SIGTERM
  std::vector<std::string> killed;   // needed SIGKILL
  std::vector<std::string> not_running;  // already gone, or its pid now runs something else
};

// Stops what another process started (`atoll stop`), as recorded in `info`'s record. First
// its supervisor, if it still runs, so that it restarts nothing that is being stopped:
// SIGTERM (it then stops its services itself), SIGKILL after `timeout`; the services that
// ended meanwhile count as stopped. Then, from the record as the supervisor left it (or
// `info` when it removed it):
// SIGTERM to each recorded process that is still the recorded atoll program (checked
// through /proc/PID/cmdline, so a recycled pid is never signalled), last started first;
// waits up to `timeout`; SIGKILLs the rest and waits up to 2 s more. Removes the record and
// the ready files once none of them runs. Fails with Unavailable naming the processes
// that survived SIGKILL.
Result<StopSummary> StopRecordedCluster(const ClusterInfo& info, std::chrono::milliseconds timeout);

// The recorded processes that still run as their recorded program.
std::vector<ProcessInfo> RunningProcesses(const ClusterInfo& info);

}  // namespace atl
