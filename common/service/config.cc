#include "common/service/config.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml.hpp>

#include "common/base/utf8.h"
#include "common/service/toml_int.h"

namespace atl {

namespace {

// The range of every numeric key (config/local.toml documents them). A batch is one ZeroMQ
// message, which services cap at 1 GiB (net::kDefaultMaxMessageBytes); a window longer than a
// second would hold tuples longer than any heartbeat. Sizes stop at 1 TiB, far beyond any
// host, so that a typo (an extra digit or three) is refused instead of mapped.
constexpr int64_t kMaxHeartbeatMs = 600'000;
constexpr int64_t kMaxLiveness = 1'000;
constexpr int64_t kMaxSchedulerWindow = 1 << 20;
constexpr int64_t kMaxBatchBytes = int64_t{1} << 30;
constexpr int64_t kMaxBatchWindowUs = 1'000'000;
constexpr int64_t kMaxCrossIslandWaitMs = 3'600'000;
constexpr int64_t kMaxInputWaitMs = 86'400'000;
constexpr int64_t kMaxCompileWaitMs = 600'000;
constexpr int64_t kMaxHeldDispatchBytes = int64_t{1} << 30;
constexpr int64_t kMaxMiB = int64_t{1} << 20;
constexpr int64_t kMaxMatmulThreads = 1024;
constexpr int64_t kMaxWaitSpinUs = 1000;
constexpr int64_t kMaxSimHostsPerProcess = 4096;

// The [quotas] keys, each with its largest value: beyond these a quota means nothing on
// any machine (2^62 bytes; ids and counters are 32 or 64 bits wide).
struct QuotaKey {
  const char* name;
  uint64_t QuotaConfig::*limit;
  int64_t max;
};
constexpr QuotaKey kQuotaKeys[] = {
    {"slices", &QuotaConfig::slices, int64_t{1} << 32},
    {"devices", &QuotaConfig::devices, int64_t{1} << 32},
    {"store_objects", &QuotaConfig::store_objects, int64_t{1} << 40},
    {"store_bytes", &QuotaConfig::store_bytes, int64_t{1} << 62},
    {"runs_in_flight", &QuotaConfig::runs_in_flight, int64_t{1} << 32},
};

template <typename T>
T Get(const toml::value& table, const char* key, T fallback) {
  if (!table.is_table() || !table.contains(key)) return fallback;
  return toml::find<T>(table, key);
}

// The array under `key`, or an empty one. Not toml::find_or: with a fallback of `{}` it
// returns a reference to that temporary, gone before a range-for over it begins.
std::vector<toml::value> Array(const toml::value& table, const char* key) {
  if (!table.is_table() || !table.contains(key)) return {};
  return toml::find<std::vector<toml::value>>(table, key);
}

// A host's size in MiB at `key`, as bytes.
Status ReadMiB(const toml::value& table, const std::string& key, const std::string& name,
               uint64_t& bytes) {
  uint64_t mib = bytes >> 20;
  ATOLL_RETURN_IF_ERROR(ReadInt(table, key, name, 1, kMaxMiB, mib));
  bytes = mib << 20;
  return Status::Ok();
}

Result<ClusterConfig> FromToml(const toml::value& root) {
  ClusterConfig c;
  if (root.contains("cluster")) {
    const auto& t = toml::find(root, "cluster");
    c.bind_host = Get(t, "bind_host", c.bind_host);
    ATOLL_RETURN_IF_ERROR(
        ReadInt(t, "heartbeat_ms", "cluster.heartbeat_ms", 1, kMaxHeartbeatMs, c.heartbeat_ms));
    ATOLL_RETURN_IF_ERROR(ReadInt(t, "liveness", "cluster.liveness", 1, kMaxLiveness, c.liveness));
    c.log_level = Get(t, "log_level", c.log_level);
    ATOLL_RETURN_IF_ERROR(ReadInt(t, "sim_hosts_per_process", "cluster.sim_hosts_per_process", 0,
                                  kMaxSimHostsPerProcess, c.sim_hosts_per_process));
  }
  if (root.contains("rm")) {
    const auto& t = toml::find(root, "rm");
    c.rm_endpoint = Get(t, "endpoint", c.rm_endpoint);
    c.events_in_endpoint = Get(t, "events_in", c.events_in_endpoint);
    c.events_out_endpoint = Get(t, "events_out", c.events_out_endpoint);
  }
  if (root.contains("scheduler")) {
    const auto& t = toml::find(root, "scheduler");
    c.scheduler_policy = Get(t, "policy", c.scheduler_policy);
    ATOLL_RETURN_IF_ERROR(
        ReadInt(t, "window", "scheduler.window", 0, kMaxSchedulerWindow, c.scheduler_window));
    ATOLL_RETURN_IF_ERROR(ReadInt(t, "cross_island_wait_ms", "scheduler.cross_island_wait_ms", 1,
                                  kMaxCrossIslandWaitMs, c.cross_island_wait_ms));
  }
  if (root.contains("executor")) {
    const auto& t = toml::find(root, "executor");
    ATOLL_RETURN_IF_ERROR(
        ReadInt(t, "input_wait_ms", "executor.input_wait_ms", 1, kMaxInputWaitMs, c.input_wait_ms));
    ATOLL_RETURN_IF_ERROR(ReadInt(t, "compile_wait_ms", "executor.compile_wait_ms", 1,
                                  kMaxCompileWaitMs, c.compile_wait_ms));
    ATOLL_RETURN_IF_ERROR(ReadInt(t, "held_dispatch_bytes", "executor.held_dispatch_bytes", 1,
                                  kMaxHeldDispatchBytes, c.held_dispatch_bytes));
  }
  if (root.contains("dataplane")) {
    const auto& t = toml::find(root, "dataplane");
    ATOLL_RETURN_IF_ERROR(ReadInt(t, "batch_bytes", "dataplane.batch_bytes", 1, kMaxBatchBytes,
                                  c.dataplane.batch_bytes));
    ATOLL_RETURN_IF_ERROR(ReadInt(t, "batch_window_us", "dataplane.batch_window_us", 0,
                                  kMaxBatchWindowUs, c.dataplane.batch_window_us));
  }
  if (root.contains("checkpoints")) {
    c.checkpoint_root = Get(toml::find(root, "checkpoints"), "root", c.checkpoint_root);
    if (!c.checkpoint_root.empty() && c.checkpoint_root.front() != '/') {
      return InvalidArgument("checkpoints.root must be an absolute path, not '" +
                             c.checkpoint_root + "'");
    }
  }
  if (root.contains("security")) {
    const auto& t = toml::find(root, "security");
    c.security.mode = Get(t, "mode", c.security.mode);
    c.security.keys_dir = Get(t, "keys_dir", c.security.keys_dir);
  }
  if (c.security.mode != "curve" && c.security.mode != "plain") {
    return InvalidArgument("security.mode must be \"curve\" or \"plain\", not \"" +
                           c.security.mode + "\"");
  }
  if (root.contains("quotas")) {
    const auto& t = toml::find(root, "quotas");
    // A misspelt quota would silently be no quota at all.
    // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
    for (const auto& entry : t.as_table()) {
      const std::string& name = entry.first;
      const bool known = std::any_of(std::begin(kQuotaKeys), std::end(kQuotaKeys),
                                     [&](const QuotaKey& key) { return name == key.name; });
      if (!known) {
        std::vector<std::string> names;
        for (const QuotaKey& key : kQuotaKeys) names.emplace_back(key.name);
        return InvalidArgument(
            fmt::format("quotas.{} is not a quota (known: {})", name, fmt::join(names, ", ")));
      }
    }
    for (const QuotaKey& key : kQuotaKeys) {
      ATOLL_RETURN_IF_ERROR(
          ReadInt(t, key.name, std::string("quotas.") + key.name, 0, key.max, c.quotas.*key.limit));
    }
  }
  if (c.scheduler_policy != "fifo" && c.scheduler_policy != "share") {
    return InvalidArgument("scheduler.policy must be \"fifo\" or \"share\", not \"" +
                           c.scheduler_policy + "\"");
  }
  std::set<std::string> names;
  for (const auto& it : Array(root, "islands")) {
    IslandConfig island;
    island.name = toml::find<std::string>(it, "name");
    for (const auto& ht : Array(it, "hosts")) {
      HostConfig h;
      h.name = toml::find<std::string>(ht, "name");
      const std::string where = "host " + h.name + ": ";
      ATOLL_RETURN_IF_ERROR(
          ReadInt(ht, "devices", where + "devices", 1, kMaxDevicesPerHost, h.devices));
      h.kind = Get(ht, "kind", h.kind);
      ATOLL_RETURN_IF_ERROR(
          ReadMiB(ht, "device_memory_mb", where + "device_memory_mb", h.device_memory_bytes));
      ATOLL_RETURN_IF_ERROR(ReadMiB(ht, "arena_mb", where + "arena_mb", h.arena_bytes));
      ATOLL_RETURN_IF_ERROR(ReadInt(ht, "matmul_threads", where + "matmul_threads", 0,
                                    kMaxMatmulThreads, h.matmul_threads));
      ATOLL_RETURN_IF_ERROR(
          ReadInt(ht, "wait_spin_us", where + "wait_spin_us", 0, kMaxWaitSpinUs, h.wait_spin_us));
      ATOLL_RETURN_IF_ERROR(CheckDeviceKind(h.kind).WithContext("host " + h.name));
      if (!names.insert(h.name).second) {
        return InvalidArgument("host name '" + h.name + "' is used twice");
      }
      island.hosts.push_back(std::move(h));
    }
    c.islands.push_back(std::move(island));
  }
  return c;
}

}  // namespace

Status CheckDeviceKind(const std::string& kind) {
  if (kind == "cpu" || kind == "sim") return Status::Ok();
  return InvalidArgument("unknown device kind '" + kind + "' (known: cpu, sim)");
}

Result<ClusterConfig> ParseClusterConfig(const std::string& toml_text, const std::string& origin) {
  // TOML is UTF-8, and toml11 3.7 reads out of bounds on some invalid sequences: refused
  // before it sees them.
  if (auto bad = FirstInvalidUtf8(toml_text)) {
    return InvalidArgument(fmt::format("{}: not UTF-8 at byte {}", origin, *bad));
  }
  try {
    std::istringstream in(toml_text);
    return FromToml(toml::parse(in, origin));
  } catch (const std::exception& e) {
    return InvalidArgument(origin + ": " + e.what());
  }
}

Result<ClusterConfig> LoadClusterConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("cannot read config file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseClusterConfig(text.str(), path);
}

Result<HostLocation> FindHost(const ClusterConfig& config, const std::string& host) {
  for (const auto& island : config.islands) {
    for (const auto& h : island.hosts) {
      if (h.name == host) return HostLocation{&island, &h};
    }
  }
  return NotFound("host '" + host + "' is not in the configuration");
}

}  // namespace atl
