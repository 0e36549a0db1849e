// Reading every object store of a running cluster: the hosts come from the RM's
// GetClusterStatus, each store's statistics from its GetStoreStats.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "common/net/transport.h"
#include "tests/status_matchers.h"

namespace atl::testing {

// Each host's object-store statistics, by host name.
inline std::map<std::string, proto::StoreStats> StoreStatsByHost(zmq::context_t& context,
                                                                 const std::string& rm) {
  std::map<std::string, proto::StoreStats> out;
  net::Requester rm_peer(context, rm);
  EXPECT_THAT(rm_peer.Connect(), IsOk());
  auto status =
      rm_peer.Call<proto::ClusterStatus>(proto::GetClusterStatus{}, std::chrono::seconds(5));
  EXPECT_THAT(status, IsOk());
  if (!status.ok()) return out;
  for (const auto& island : status->islands) {
    for (const auto& host : island.hosts) {
      net::Requester store(context, host.store_endpoint);
      EXPECT_THAT(store.Connect(), IsOk());
      auto stats = store.Call<proto::StoreStats>(proto::GetStoreStats{}, std::chrono::seconds(5));
      EXPECT_THAT(stats, IsOk()) << host.name << ": " << stats.status().ToString();
      if (stats.ok()) out[host.name] = *stats;
    }
  }
  return out;
}

// How many objects `owner` has in one store.
inline uint64_t ObjectsOf(const proto::StoreStats& stats, uint64_t owner) {
  auto it = stats.objects_per_owner.find(owner);
  return it == stats.objects_per_owner.end() ? 0 : it->second;
}

// How many releases of objects not created (yet) `owner` has in all the stores: none once
// each of its releases met its object, several when it released an object twice.
inline uint64_t TombstonesOf(const std::map<std::string, proto::StoreStats>& stores,
                             uint64_t owner) {
  uint64_t n = 0;
  for (const auto& [host, stats] : stores) {
    auto it = stats.tombstones_per_owner.find(owner);
    if (it != stats.tombstones_per_owner.end()) n += it->second;
  }
  return n;
}

// How many objects `owner` has in all the stores.
inline uint64_t ObjectsOf(const std::map<std::string, proto::StoreStats>& stores, uint64_t owner) {
  uint64_t n = 0;
  for (const auto& [host, stats] : stores) n += ObjectsOf(stats, owner);
  return n;
}

}  // namespace atl::testing
