// The cluster as the RM says it is (ClusterStatus, asked as a member): which host and island
// each device is on and its kind, each host's liveness (its executor's and its store's), each
// island's scheduler, each slice's devices.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/net/transport.h"
#include "tests/e2e/member_context.h"
#include "tests/status_matchers.h"

namespace atl::testing {

struct Topology {
  std::map<uint32_t, std::string> host_of;
  std::map<uint32_t, std::string> kind_of;       // by device: "cpu", "sim"
  std::map<std::string, std::string> island_of;  // by host
  std::map<std::string, bool> alive;             // by host: its executor is
  std::map<std::string, bool> store_alive;       // by host
  std::map<std::string, bool> scheduled;         // by island: its scheduler is alive
  std::map<uint64_t, std::vector<uint32_t>> slices;
};

inline Topology AskRm(const std::string& rm) {
  MemberContext context;
  net::Requester peer(context, rm);
  EXPECT_THAT(peer.Connect(), IsOk());
  auto status = peer.Call<proto::ClusterStatus>(proto::GetClusterStatus{}, std::chrono::seconds(5));
  EXPECT_THAT(status, IsOk());
  Topology t;
  if (!status.ok()) return t;
  for (const auto& island : status->islands) {
    t.scheduled[island.name] = island.scheduler_alive;
    for (const auto& host : island.hosts) {
      t.island_of[host.name] = island.name;
      t.alive[host.name] = host.alive;
      t.store_alive[host.name] = host.store_alive;
      for (const auto& d : host.devices) {
        t.host_of[d.device_id] = host.name;
        t.kind_of[d.device_id] = d.kind;
      }
    }
  }
  for (const auto& s : status->slices) t.slices[s.slice_id] = s.device_ids;
  return t;
}

// The hosts a slice's devices are on.
inline std::set<std::string> HostsOf(const Topology& t, uint64_t slice) {
  std::set<std::string> hosts;
  for (uint32_t d : t.slices.at(slice)) hosts.insert(t.host_of.at(d));
  return hosts;
}

}  // namespace atl::testing
