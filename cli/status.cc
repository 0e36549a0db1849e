// `atoll status`: asks the RM for the cluster's state (GetClusterStatus) and each live
// host's object store for its memory (GetStoreStats), and prints islands, hosts, devices
// with the memory in use, objects per owner, and slices, as text or as JSON. With a state
// dir (not --rm), also each service's pid and how often its supervisor restarted it. Each
// service's event loop's longest stall (the RM's own, the others' from their heartbeats)
// says whether one fell behind its peers' heartbeats, before any was declared lost.
#include <iostream>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/net/transport.h"
#include "common/proto/protocol.h"

namespace atl {

namespace {

struct StatusOptions {
  bool json = false;
  int64_t timeout_ms = 3000;
};

std::string Mib(uint64_t bytes) {
  if (bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1u << 20));
}

// Each live host's object-store statistics, by host name; a store that does not answer is
// left out (the status shows it as unknown rather than failing).
using StoreStatsByHost = std::map<std::string, proto::StoreStats>;

StoreStatsByHost AskStores(zmq::context_t& context, const proto::ClusterStatus& s,
                           std::chrono::milliseconds timeout) {
  StoreStatsByHost out;
  for (const auto& island : s.islands) {
    for (const auto& host : island.hosts) {
      if (!host.store_alive || host.store_endpoint.empty()) continue;
      net::Requester store(context, host.store_endpoint);
      if (!store.Connect().ok()) continue;
      auto stats = store.Call<proto::StoreStats>(proto::GetStoreStats{}, timeout);
      if (stats.ok()) out[host.name] = std::move(*stats);
    }
  }
  return out;
}

const proto::StoreStats* StatsOf(const StoreStatsByHost& stores, const std::string& host) {
  auto it = stores.find(host);
  return it == stores.end() ? nullptr : &it->second;
}

// Memory in use on the host's local device `index`, when its store answered.
std::optional<uint64_t> DeviceInUse(const proto::StoreStats* stats, size_t index) {
  if (stats == nullptr || index >= stats->device_bytes_in_use.size()) return std::nullopt;
  return stats->device_bytes_in_use[index];
}

// "client 3: 2, unowned: 1"
std::string OwnersText(const std::map<uint64_t, uint64_t>& per_owner) {
  std::vector<std::string> parts;
  for (const auto& [owner, count] : per_owner) {
    parts.push_back(owner == 0 ? fmt::format("unowned: {}", count)
                               : fmt::format("client {}: {}", owner, count));
  }
  return parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, ", "));
}

// The longest of every service's event loop's longest stall, and whose: "12 ms (rm)".
std::string LongestStallText(const proto::ClusterStatus& s) {
  uint64_t longest = s.rm_stall_us;
  std::string whose = "rm";
  auto consider = [&](uint64_t us, std::string name) {
    if (us > longest) longest = us, whose = std::move(name);
  };
  for (const auto& island : s.islands) {
    consider(island.scheduler_stall_us, "scheduler-" + island.name);
    for (const auto& host : island.hosts) {
      consider(host.executor_stall_us, "executor-" + host.name);
      consider(host.store_stall_us, "objectstore-" + host.name);
    }
  }
  return fmt::format("{} ms ({})", longest / 1000, whose);
}

// "rm 0, scheduler-island0 2 (down), ...": restarts per service, from cluster.toml.
std::string RestartsText(const std::vector<ProcessInfo>& services) {
  std::vector<std::string> parts;
  for (const auto& p : services) {
    parts.push_back(fmt::format("{} {}{}", p.name, p.restarts, p.pid == 0 ? " (down)" : ""));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

nlohmann::ordered_json ToJson(const proto::ClusterStatus& s, const StoreStatsByHost& stores,
                              const ClusterInfo& info) {
  nlohmann::ordered_json out;
  out["rm_endpoint"] = info.rm_endpoint;
  out["rm_longest_stall_us"] = s.rm_stall_us;
  out["islands"] = nlohmann::ordered_json::array();
  for (const auto& island : s.islands) {
    nlohmann::ordered_json ij;
    ij["name"] = island.name;
    ij["scheduler_endpoint"] = island.scheduler_endpoint;
    ij["scheduler_alive"] = island.scheduler_alive;
    ij["scheduler_longest_stall_us"] = island.scheduler_stall_us;
    ij["hosts"] = nlohmann::ordered_json::array();
    for (const auto& host : island.hosts) {
      nlohmann::ordered_json hj;
      hj["name"] = host.name;
      hj["alive"] = host.alive;
      hj["control_endpoint"] = host.control_endpoint;
      hj["store_endpoint"] = host.store_endpoint;
      hj["store_alive"] = host.store_alive;
      hj["executor_longest_stall_us"] = host.executor_stall_us;
      hj["store_longest_stall_us"] = host.store_stall_us;
      const proto::StoreStats* stats = StatsOf(stores, host.name);
      hj["devices"] = nlohmann::ordered_json::array();
      for (size_t i = 0; i < host.devices.size(); ++i) {
        const auto& d = host.devices[i];
        nlohmann::ordered_json dj{{"id", d.device_id},
                                  {"kind", d.kind},
                                  {"memory_bytes", d.memory_bytes},
                                  {"slices", d.slices}};
        const auto in_use = DeviceInUse(stats, i);
        dj["memory_in_use_bytes"] = in_use ? nlohmann::ordered_json(*in_use) : nullptr;
        hj["devices"].push_back(std::move(dj));
      }
      if (stats != nullptr) {
        nlohmann::ordered_json owners = nlohmann::ordered_json::object();
        for (const auto& [owner, count] : stats->objects_per_owner) {
          owners[std::to_string(owner)] = count;
        }
        hj["store"] = {{"objects", stats->objects},
                       {"arena_bytes_in_use", stats->bytes_in_use},
                       {"arena_bytes", stats->arena_bytes},
                       {"objects_per_owner", std::move(owners)}};
      } else {
        hj["store"] = nullptr;  // dead, or its store did not answer
      }
      ij["hosts"].push_back(std::move(hj));
    }
    out["islands"].push_back(std::move(ij));
  }
  out["slices"] = nlohmann::ordered_json::array();
  for (const auto& slice : s.slices) {
    out["slices"].push_back({{"id", slice.slice_id},
                             {"client", slice.client_id},
                             {"island", slice.island},
                             {"devices", slice.device_ids}});
  }
  out["functions"] = s.functions;
  out["clients"] = s.clients;
  // From the state dir; empty with --rm. pid 0: down, waiting to be restarted.
  out["services"] = nlohmann::ordered_json::array();
  for (const auto& p : info.processes) {
    out["services"].push_back({{"name", p.name}, {"pid", p.pid}, {"restarts", p.restarts}});
  }
  return out;
}

void PrintText(const proto::ClusterStatus& s, const StoreStatsByHost& stores,
               const ClusterInfo& info) {
  size_t hosts = 0, alive = 0, devices = 0;
  for (const auto& island : s.islands) {
    for (const auto& host : island.hosts) {
      ++hosts;
      alive += host.alive ? 1 : 0;
      devices += host.devices.size();
    }
  }
  std::cout << fmt::format(
      "cluster at {}: {} islands, {} hosts ({} alive), {} devices, {} slices, {} functions, "
      "{} clients\n",
      info.rm_endpoint, s.islands.size(), hosts, alive, devices, s.slices.size(), s.functions,
      s.clients);
  for (const auto& island : s.islands) {
    std::cout << fmt::format(
        "island {}  scheduler {}{}\n", island.name,
        island.scheduler_endpoint.empty() ? "(not registered)" : island.scheduler_endpoint,
        island.scheduler_alive || island.scheduler_endpoint.empty() ? "" : " LOST");
    for (const auto& host : island.hosts) {
      std::cout << fmt::format("  host {:<8} {:<5}  control {}  store {}{}\n", host.name,
                               host.alive ? "alive" : "DEAD", host.control_endpoint,
                               host.store_endpoint, host.store_alive ? "" : " LOST");
      const proto::StoreStats* stats = StatsOf(stores, host.name);
      for (size_t i = 0; i < host.devices.size(); ++i) {
        const auto& d = host.devices[i];
        const auto in_use = DeviceInUse(stats, i);
        std::cout << fmt::format("    device {:<3} {:<4} {:>10} in use of {:>10}  {} slices\n",
                                 d.device_id, d.kind, in_use ? Mib(*in_use) : "?",
                                 Mib(d.memory_bytes), d.slices);
      }
      if (stats != nullptr) {
        std::cout << fmt::format("    store: {} objects ({}), arena {} in use of {}\n",
                                 stats->objects, OwnersText(stats->objects_per_owner),
                                 Mib(stats->bytes_in_use), Mib(stats->arena_bytes));
      } else if (host.store_alive) {
        std::cout << "    store: did not answer\n";
      }
    }
  }
  if (!s.slices.empty()) std::cout << "slices\n";
  for (const auto& slice : s.slices) {
    std::cout << fmt::format("  slice {:<4} client {:<4} island {}  devices [{}]\n", slice.slice_id,
                             slice.client_id, slice.island, fmt::join(slice.device_ids, ", "));
  }
  std::cout << "event loops' longest stall: " << LongestStallText(s) << "\n";
  if (!info.processes.empty()) std::cout << "restarts: " << RestartsText(info.processes) << "\n";
  std::cout << std::flush;
}

void RunStatus(const StatusOptions& opts, const GlobalOptions& global) {
  auto info = ResolveCluster(global);
  if (!info.ok()) Fail(info.status());
  zmq::context_t context(1);
  if (Status s = SecureContext(context, global); !s.ok()) Fail(s.WithContext("status"));
  net::Requester rm(context, info->rm_endpoint);
  if (Status s = rm.Connect(/*watch_handshakes=*/true); !s.ok()) Fail(s.WithContext("status"));
  auto status = rm.Call<proto::ClusterStatus>(proto::GetClusterStatus{},
                                              std::chrono::milliseconds(opts.timeout_ms));
  if (!status.ok()) {
    if (status.status().code() == Code::kDeadlineExceeded) {
      Fail("RM at " + info->rm_endpoint + " did not answer within " +
           std::to_string(opts.timeout_ms) + " ms (is the cluster running? see `atoll up`)");
    }
    Fail("status: RM at " + info->rm_endpoint + ": " + status.status().ToString());
  }
  const StoreStatsByHost stores =
      AskStores(context, *status, std::chrono::milliseconds(opts.timeout_ms));
  if (opts.json) {
    std::cout << ToJson(*status, stores, *info).dump(2) << std::endl;
  } else {
    PrintText(*status, stores, *info);
  }
}

}  // namespace

void AddStatusCommand(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<StatusOptions>();
  auto* cmd = app.add_subcommand(
      "status", "Show the cluster's islands, hosts, devices (memory in use), objects, slices");
  cmd->add_flag("--json", opts->json, "Print the status as one JSON object");
  cmd->add_option("--timeout-ms", opts->timeout_ms, "How long to wait for the RM's answer")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->callback([opts, &global] { RunStatus(*opts, global); });
}

}  // namespace atl
