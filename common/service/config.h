// The cluster configuration (config/local.toml): where the RM listens, the islands and the
// hosts in them. Every service reads the same file and picks its own part by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "atoll/status.h"

namespace atl {

// Every number below is read range-checked (config/local.toml gives each range): a value
// outside it is InvalidArgument naming the key, never wrapped into an unsigned field.
struct HostConfig {
  std::string name;
  uint32_t devices = 1;  // 1..65536
  // "cpu": real kernels on host threads; "sim": `spin` sleeps for its time instead of
  // burning a core (so many simulated devices share a small machine honestly).
  std::string kind = "cpu";
  uint64_t device_memory_bytes = 256ull << 20;  // per device; device_memory_mb, 1 MiB..1 TiB
  uint64_t arena_bytes = 256ull << 20;  // the object store's shared-memory arena; arena_mb, alike
  // Threads each device's matmuls run on (kernels/matmul_threads.h): 0..1024; 0 gives each
  // device an even share of the cores the executor may use, max(1, cores / devices).
  uint32_t matmul_threads = 0;
  // How long a device thread, or a shard waiting in a collective, spins before it sleeps
  // (SpinCondition), in microseconds: 0..1000. 0 (the default): sleep at once. Spinning
  // pays only where each device thread has a core of its own: on 2 cores shared by a
  // cluster's services it took the cores from the threads that had work.
  uint32_t wait_spin_us = 0;
};

// The executors' data plane (tuples between executors). Tuples bound for one host are
// batched into one message until the batch holds `batch_bytes` or its oldest tuple has
// waited `batch_window_us`; a window of 0 sends at the end of the executor's loop turn that
// queued them (no time window). Collective partials never wait for the window.
struct DataPlaneConfig {
  uint64_t batch_bytes = 64 << 10;
  uint32_t batch_window_us = 0;
};

// Who may talk to the cluster. "curve": every socket is encrypted and every peer
// authenticated with CURVE keys (`atoll keygen`): services hold the cluster's key pair,
// clients keys the cluster allows. "plain": plain text, and every peer is believed (for
// tests that say so, and for benchmarks' plain-text series).
struct SecurityConfig {
  std::string mode = "curve";
  // Where the keys are (see common/net/curve_keys.h). Empty: the launcher's
  // <state dir>/keys, made on first start; a service needs --keys then.
  std::string keys_dir;
  bool curve() const { return mode == "curve"; }
};

// Per-client quotas ([quotas]). A client is one connection: one id, given by the RM at
// HelloClient. Each is enforced where the thing is created, and a request over it is
// refused with ResourceExhausted naming the quota, its limit, the use and the request.
// 0: unlimited (the default for every one).
struct QuotaConfig {
  uint64_t slices = 0;          // slices held at once (the RM, at CreateSlice)
  uint64_t devices = 0;         // devices summed over its slices (the RM, at CreateSlice)
  uint64_t store_objects = 0;   // objects it owns in each object store (that store)
  uint64_t store_bytes = 0;     // bytes of those objects' shards, in each object store
  uint64_t runs_in_flight = 0;  // runs submitted and not finished, on each island's scheduler
};

// The configuration's islands are a starting list: the RM admits islands and hosts that
// register at run time too (`atoll start host`), and an island may list no hosts.
struct IslandConfig {
  std::string name;
  std::vector<HostConfig> hosts;
};

struct ClusterConfig {
  // RM endpoints. A port of "*" or 0 picks a free port (tests); the chosen addresses are
  // then published through ready files (see launcher/local_cluster.h).
  std::string rm_endpoint = "tcp://127.0.0.1:5550";
  std::string events_in_endpoint = "tcp://127.0.0.1:5551";   // publishers connect here
  std::string events_out_endpoint = "tcp://127.0.0.1:5552";  // subscribers connect here
  // Address that executors, schedulers and object stores bind their own sockets on; their
  // ports are always chosen freely and registered with the RM.
  std::string bind_host = "127.0.0.1";
  // The address a service puts in the endpoints it registers and publishes (--advertise;
  // not a config key: each machine has its own). Empty: the address it bound, or, when
  // bind_host is a wildcard (0.0.0.0), that of the interface routing to the RM
  // (common/service/advertise.h). Never a wildcard.
  std::string advertise_host;
  uint32_t heartbeat_ms = 500;  // period of every heartbeat: 1..600000
  uint32_t liveness = 4;        // missed heartbeats before a peer is declared dead: 1..1000
  std::string log_level = "info";
  // Island schedulers: "fifo" (first come, first served) or "share" (proportional share
  // between clients by their weights), and how many gangs each keeps in flight (0: no
  // limit; "share" needs a limit to have anything to reorder), at most 2^20.
  std::string scheduler_policy = "fifo";
  uint32_t scheduler_window = 0;
  // How long a gang fed by other islands may wait for their schedulers to place its
  // producers before its run fails (a client or scheduler that died mid-submission):
  // milliseconds, 1..3600000.
  uint32_t cross_island_wait_ms = 60000;
  // How long an executor lets a queued shard wait for a tuple whose producer was scheduled
  // before failing it (DeadlineExceeded), so that a tuple lost in flight cannot hold a
  // device for ever: milliseconds, 1..86400000. Long: a producer may compute for minutes.
  uint32_t input_wait_ms = 600000;
  // How long after registering a restarted executor holds dispatches that name functions
  // the RM is still to compile on it (it gets them only after its registration reply, and
  // dispatches may come first) before their shards fail (NotFound): milliseconds,
  // 1..600000. Later dispatches wait behind a held one, keeping gang order.
  uint32_t compile_wait_ms = 5000;
  // The most bytes of argument values (the small ones that travel inside dispatches) those
  // held dispatches may keep: past it, a dispatch to hold is given up (ResourceExhausted)
  // and its values dropped. 1..2^30; held dispatches are also bounded by compile_wait_ms.
  uint32_t held_dispatch_bytes = 64 << 20;
  // How many hosts of kind "sim" the launcher runs in one `atoll-simhosts` process (each
  // host still its own executor and object store, with its own sockets), so that hundreds
  // of simulated hosts fit on one machine: 1..4096. 0: every host is two processes.
  uint32_t sim_hosts_per_process = 0;
  // Where each object store reads and writes checkpoints ([checkpoints] root): client paths
  // are relative to it. Empty: the launcher's <state dir>/checkpoints, given to each store as
  // --checkpoint-root; a store given neither refuses checkpoints (FailedPrecondition).
  std::string checkpoint_root;
  DataPlaneConfig dataplane;
  SecurityConfig security;
  QuotaConfig quotas;
  std::vector<IslandConfig> islands;
};

// The most devices a host may have.
inline constexpr int64_t kMaxDevicesPerHost = 1 << 16;

// InvalidArgument unless `kind` is a device kind: "cpu" or "sim".
Status CheckDeviceKind(const std::string& kind);

Result<ClusterConfig> LoadClusterConfig(const std::string& path);
Result<ClusterConfig> ParseClusterConfig(const std::string& toml_text,
                                         const std::string& origin = "config");

// Finds a host by name; NotFound when no island has it.
struct HostLocation {
  const IslandConfig* island = nullptr;
  const HostConfig* host = nullptr;
};
Result<HostLocation> FindHost(const ClusterConfig& config, const std::string& host);

}  // namespace atl
