// A benchmark's cluster, started the way `atoll up` starts one: the given configuration is
// written to <dir>/cluster.toml, the state (logs, ready files, keys) goes under <dir>/state,
// and the service binaries come from `bin_dir`. The cluster stops when the result is
// destroyed. Starting one points $ATOLL_KEYS at its keys, for the benchmark's clients.
#pragma once

#include <memory>
#include <string>

#include "atoll/status.h"
#include "launcher/local_cluster.h"

namespace atl::bench {

// A benchmark's cluster: islands island0, island1, ... of `hosts` identical hosts each, named
// h0, h1, ... across islands, every service on `address` (loopback unless told), every RM
// endpoint on a free port (see config/local.toml for what the keys mean).
struct BenchTopology {
  int islands = 1;
  int hosts = 1;  // per island
  int devices_per_host = 1;
  std::string kind = "sim";
  int heartbeat_ms = 500;
  int liveness = 10;
  int device_memory_mb = 0;  // 0: the config's default
  int arena_mb = 0;          // 0: the config's default
  // "plain" (every series unless it says otherwise) or "curve" (authenticated, encrypted).
  std::string security = "plain";
  // Hosts run this many to an atoll-simhosts process (cluster.sim_hosts_per_process; kind
  // "sim" only); 0: each host is two processes.
  int sim_hosts_per_process = 0;
  std::string extra_toml;  // more tables, e.g. "[scheduler]\npolicy = \"share\"\n"
  // The IPv4 address every service binds and is reached at: the cluster's bind_host.
  std::string address = "127.0.0.1";
};
std::string ClusterToml(const BenchTopology& topology);

Result<std::unique_ptr<LocalCluster>> StartBenchCluster(const std::string& dir,
                                                        const std::string& config_toml,
                                                        const std::string& bin_dir);

}  // namespace atl::bench
