// A gang's hosts without processes: each its own CollectiveHub, wired so that what one sends
// lands at once in the hub it names (as the data plane would deliver it), counting the
// messages per ordered pair of hosts; and the layouts and ops the collective tests use.
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "services/executor/collective_hub.h"

namespace atl::executor::testutil {

class HubNetwork {
 public:
  HubNetwork(const std::vector<std::string>& hosts, size_t all_pairs_max_hosts,
             std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    for (const auto& host : hosts) {
      hubs_[host] = std::make_unique<CollectiveHub>(
          host,
          [this, host](const std::string& endpoint, const CollectiveKey& key, CollectiveValue what,
                       uint32_t from_host, Result<Tensor> value) {
            {
              std::lock_guard lock(mu_);
              ++messages_[{host, endpoint}];
            }
            CollectiveHub& to = *hubs_.at(endpoint);
            if (what == CollectiveValue::kTotal) {
              to.DepositTotal(key, value);
            } else {
              to.Deposit(key, from_host, value);
            }
          },
          timeout, all_pairs_max_hosts);
    }
  }
  CollectiveHub& hub(const std::string& host) { return *hubs_.at(host); }

  // Messages sent so far, in all and per (from, to) host.
  int messages() const {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const auto& [pair, count] : messages_) n += count;
    return n;
  }
  std::map<std::pair<std::string, std::string>, int> messages_per_pair() const {
    std::lock_guard lock(mu_);
    return messages_;
  }

  // Every shard of `layout` runs collective `op` on `blocks[shard]` on a thread of its own,
  // but those in `abandoned`, which abandon it with `why`; the results by shard.
  std::vector<Result<Tensor>> Run(const CollectiveKey& key, const GangLayout& layout,
                                  const CollectiveOp& op, const std::vector<Tensor>& blocks,
                                  const std::set<uint32_t>& abandoned = {},
                                  const Status& why = Status::Ok()) {
    std::vector<std::future<Result<Tensor>>> shards;
    for (uint32_t s = 0; s < layout.shard_endpoints.size(); ++s) {
      shards.push_back(std::async(std::launch::async, [&, s]() -> Result<Tensor> {
        CollectiveHub& here = hub(layout.shard_endpoints[s]);
        if (!abandoned.count(s)) return here.Run(key, layout, op, s, blocks[s]);
        here.Abandon(key, layout, op, s, why);
        return why;
      }));
    }
    std::vector<Result<Tensor>> out;
    for (auto& shard : shards) out.push_back(shard.get());
    return out;
  }

 private:
  std::map<std::string, std::unique_ptr<CollectiveHub>> hubs_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, int> messages_;
};

inline std::vector<std::string> HostNames(int hosts) {
  std::vector<std::string> names;
  for (int h = 0; h < hosts; ++h) names.push_back(fmt::format("tcp://h{:03}:1", h));
  return names;
}

// Shard s on host s % hosts: every host holds shards from all over the slice.
inline GangLayout Interleaved(const std::vector<std::string>& hosts, int shards) {
  std::vector<std::string> endpoints;
  for (int s = 0; s < shards; ++s) endpoints.push_back(hosts[s % hosts.size()]);
  return GangLayout(endpoints);
}

// Shards in runs of shards / hosts per host, in order (the last host takes what is left).
inline GangLayout Blocked(const std::vector<std::string>& hosts, int shards) {
  std::vector<std::string> endpoints;
  const int per_host =
      (shards + static_cast<int>(hosts.size()) - 1) / static_cast<int>(hosts.size());
  for (int s = 0; s < shards; ++s) endpoints.push_back(hosts[s / per_host]);
  return GangLayout(endpoints);
}

// The all-reduce sum over every shard of a 1-D slice of `shards` devices.
inline CollectiveOp WholeSliceSum(int64_t shards) {
  CollectiveOp op;
  op.code = ir::OpCode::kAllReduceSum;
  op.mesh = {shards};
  op.axis = ir::kWholeSlice;
  return op;
}

}  // namespace atl::executor::testutil
