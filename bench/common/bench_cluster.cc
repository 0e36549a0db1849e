#include "bench/common/bench_cluster.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

namespace atl::bench {

std::string ClusterToml(const BenchTopology& t) {
  std::string toml = fmt::format(R"([cluster]
bind_host = "{0}"
heartbeat_ms = {1}
liveness = {2}
log_level = "warn"
sim_hosts_per_process = {5}
[rm]
endpoint = "tcp://{0}:*"
events_in = "tcp://{0}:*"
events_out = "tcp://{0}:*"
[security]
mode = "{3}"
{4})",
                                 t.address, t.heartbeat_ms, t.liveness, t.security, t.extra_toml,
                                 t.sim_hosts_per_process);
  for (int i = 0; i < t.islands; ++i) {
    toml += fmt::format("[[islands]]\nname = \"island{}\"\n", i);
    for (int h = i * t.hosts; h < (i + 1) * t.hosts; ++h) {
      toml += fmt::format("[[islands.hosts]]\nname = \"h{}\"\ndevices = {}\nkind = \"{}\"\n", h,
                          t.devices_per_host, t.kind);
      if (t.device_memory_mb > 0)
        toml += fmt::format("device_memory_mb = {}\n", t.device_memory_mb);
      if (t.arena_mb > 0) toml += fmt::format("arena_mb = {}\n", t.arena_mb);
    }
  }
  return toml;
}

Result<std::unique_ptr<LocalCluster>> StartBenchCluster(const std::string& dir,
                                                        const std::string& config_toml,
                                                        const std::string& bin_dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return Unavailable("cannot create " + dir + ": " + error.message());
  LocalClusterOptions options;
  options.config_path = dir + "/cluster.toml";
  options.state_dir = dir + "/state";
  options.bin_dir = bin_dir;
  std::ofstream(options.config_path) << config_toml;
  auto cluster = std::make_unique<LocalCluster>(options);
  ATOLL_RETURN_IF_ERROR(cluster->Start());
  // The benchmark's clients connect with the cluster's keys (or in plain text).
  setenv("ATOLL_KEYS", cluster->keys_dir().c_str(), 1);
  return cluster;
}

}  // namespace atl::bench
