#include "common/service/config.h"

#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml.hpp>

#include "common/base/utf8.h"

namespace atl {

namespace {

// A batch is one ZeroMQ message, which services cap at 1 GiB (net::kDefaultMaxMessageBytes);
// a window longer than a second would hold tuples longer than any heartbeat.
constexpr int64_t kMaxBatchBytes = int64_t{1} << 30;
constexpr int64_t kMaxBatchWindowUs = 1'000'000;
constexpr int64_t kMaxCrossIslandWaitMs = 3'600'000;
constexpr int64_t kMaxInputWaitMs = 86'400'000;

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

// A size given in MiB, in bytes; InvalidArgument when the bytes do not fit in 64 bits.
Result<uint64_t> MebibytesAt(const toml::value& table, const char* key, uint64_t fallback_bytes,
                             const std::string& host) {
  const auto mb = Get<uint64_t>(table, key, fallback_bytes >> 20);
  if (mb > (UINT64_MAX >> 20)) {
    return InvalidArgument(fmt::format("host {}: {} = {} MiB is too large", host, key, mb));
  }
  return mb << 20;
}

Result<ClusterConfig> FromToml(const toml::value& root) {
  ClusterConfig c;
  if (root.contains("cluster")) {
    const auto& t = toml::find(root, "cluster");
    c.bind_host = Get(t, "bind_host", c.bind_host);
    c.heartbeat_ms = Get(t, "heartbeat_ms", c.heartbeat_ms);
    c.liveness = Get(t, "liveness", c.liveness);
    c.log_level = Get(t, "log_level", c.log_level);
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
    c.scheduler_window = Get(t, "window", c.scheduler_window);
    const auto wait = Get<int64_t>(t, "cross_island_wait_ms", c.cross_island_wait_ms);
    if (wait <= 0 || wait > kMaxCrossIslandWaitMs) {
      return InvalidArgument(fmt::format("scheduler.cross_island_wait_ms must be in 1..{}, not {}",
                                         kMaxCrossIslandWaitMs, wait));
    }
    c.cross_island_wait_ms = static_cast<uint32_t>(wait);
  }
  if (root.contains("executor")) {
    const auto& t = toml::find(root, "executor");
    const auto wait = Get<int64_t>(t, "input_wait_ms", c.input_wait_ms);
    if (wait <= 0 || wait > kMaxInputWaitMs) {
      return InvalidArgument(
          fmt::format("executor.input_wait_ms must be in 1..{}, not {}", kMaxInputWaitMs, wait));
    }
    c.input_wait_ms = static_cast<uint32_t>(wait);
  }
  if (root.contains("dataplane")) {
    const auto& t = toml::find(root, "dataplane");
    // Read as signed so that a negative value is refused by name, not wrapped around.
    const auto bytes = Get<int64_t>(t, "batch_bytes", int64_t(c.dataplane.batch_bytes));
    const auto window = Get<int64_t>(t, "batch_window_us", c.dataplane.batch_window_us);
    if (bytes <= 0 || bytes > kMaxBatchBytes) {
      return InvalidArgument(
          fmt::format("dataplane.batch_bytes must be in 1..{}, not {}", kMaxBatchBytes, bytes));
    }
    if (window < 0 || window > kMaxBatchWindowUs) {
      return InvalidArgument(fmt::format("dataplane.batch_window_us must be in 0..{}, not {}",
                                         kMaxBatchWindowUs, window));
    }
    c.dataplane.batch_bytes = static_cast<uint64_t>(bytes);
    c.dataplane.batch_window_us = static_cast<uint32_t>(window);
  }
  if (c.scheduler_policy != "fifo" && c.scheduler_policy != "share") {
    return InvalidArgument("scheduler.policy must be \"fifo\" or \"share\", not \"" +
                           c.scheduler_policy + "\"");
  }
  if (c.heartbeat_ms == 0) return InvalidArgument("cluster.heartbeat_ms must be > 0");
  if (c.liveness == 0) return InvalidArgument("cluster.liveness must be > 0");
  std::set<std::string> names;
  for (const auto& it : Array(root, "islands")) {
    IslandConfig island;
    island.name = toml::find<std::string>(it, "name");
    for (const auto& ht : Array(it, "hosts")) {
      HostConfig h;
      h.name = toml::find<std::string>(ht, "name");
      h.devices = Get(ht, "devices", h.devices);
      h.kind = Get(ht, "kind", h.kind);
      ATOLL_ASSIGN_OR_RETURN(h.device_memory_bytes,
                             MebibytesAt(ht, "device_memory_mb", h.device_memory_bytes, h.name));
      ATOLL_ASSIGN_OR_RETURN(h.arena_bytes, MebibytesAt(ht, "arena_mb", h.arena_bytes, h.name));
      if (h.devices == 0) return InvalidArgument("host " + h.name + ": devices must be > 0");
      if (h.kind != "cpu" && h.kind != "sim") {
        return InvalidArgument("host " + h.name + ": unknown device kind '" + h.kind +
                               "' (known: cpu, sim)");
      }
      if (!names.insert(h.name).second) {
        return InvalidArgument("host name '" + h.name + "' is used twice");
      }
      island.hosts.push_back(std::move(h));
    }
    if (island.hosts.empty()) return InvalidArgument("island " + island.name + " has no hosts");
    c.islands.push_back(std::move(island));
  }
  if (c.islands.empty()) return InvalidArgument("the configuration names no [[islands]]");
  return c;
}

}  // namespace

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
