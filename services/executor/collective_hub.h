// CollectiveHub: where the shards of a gang meet for collective ops. Shards on this host
// meet in memory; the host's partial result then goes to every other host of the gang
// over the data plane, and each host sums the partials itself, in host order, so every
// replica gets bit-identical results. Messages per all-reduce grow with hosts squared,
// not with shards.
//
// Thread-safe: device threads call AllReduceSum; the executor's loop calls Deposit.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "atoll/tensor.h"

namespace atl::executor {

// One collective op of one gang: (run, node, op index).
struct CollectiveKey {
  uint64_t run = 0;
  uint32_t node = 0;
  uint32_t op = 0;
  auto operator<=>(const CollectiveKey&) const = default;
};

// Where the shards of a function's slice live: shard i runs on the executor whose data
// endpoint is shard_endpoints[i].
struct GangLayout {
  std::vector<std::string> shard_endpoints;
  std::vector<std::string> hosts;  // distinct endpoints, sorted: a host's index is its place
  GangLayout() = default;
  explicit GangLayout(std::vector<std::string> endpoints);
  size_t HostIndex(const std::string& endpoint) const;  // hosts.size() when absent
};

class CollectiveHub {
 public:
  // Sends this host's partial to another host of the gang (`endpoint`); called with no
  // lock held, from the device thread that completed the host's partial.
  using SendPartial = std::function<void(const std::string& endpoint, const CollectiveKey& key,
                                         uint32_t from_host, const Result<Tensor>& partial)>;

  CollectiveHub(std::string self_endpoint, SendPartial send, std::chrono::milliseconds timeout);

  // Contributes shard `shard`'s tensor and waits (at most the hub's timeout) for the sum
  // over every shard of the gang. Fails at once, without contributing, when a host of the
  // gang whose partial has not come is lost (HostLost).
  Result<Tensor> AllReduceSum(const CollectiveKey& key, const GangLayout& layout, uint32_t shard,
                              Tensor local);
  // Shard `shard` failed before it reached all-reduce `key` (`why`): it will never
  // contribute, so the all-reduce fails with `why` on this host at once, and the gang's
  // other hosts get `why` as this host's partial instead of waiting for it.
  void Abandon(const CollectiveKey& key, const GangLayout& layout, uint32_t shard,
               const Status& why);
  // A partial from host `from_host` of the gang (or its error), from the data plane.
  void Deposit(const CollectiveKey& key, uint32_t from_host, Result<Tensor> partial);

  // The host with data endpoint `endpoint` was lost (`why`, which names it): every
  // all-reduce still missing its partial fails now with `why`, and so does every later one
  // whose gang includes it, until HostBack.
  void HostLost(const std::string& endpoint, const Status& why);
  void HostBack(const std::string& endpoint);
  // The executor is stopping: every all-reduce waiting now, and every later one, fails
  // with `why` at once, so that device threads can be joined.
  void Stop(const Status& why);

 private:
  struct State {
    size_t local_expected = 0;         // shards of the gang on this host; 0 until one arrives
    std::map<uint32_t, Tensor> local;  // by shard
    std::map<uint32_t, Result<Tensor>> host_partials;  // by host index
    std::vector<std::string> hosts;                    // the gang's, as in GangLayout::hosts
    size_t readers_left = 0;
    std::optional<Result<Tensor>> total;
  };
  // The all-reduce `key`'s state, made for `layout` on first use. Called with mu_ held.
  State& StateOf(const CollectiveKey& key, const GangLayout& layout);
  // Sums the values in key order; any error wins.
  static Result<Tensor> SumInOrder(const std::vector<const Result<Tensor>*>& parts);
  // Why the all-reduce `key` cannot complete: a host it still waits for is lost. Nullopt
  // when none is. Called with mu_ held.
  std::optional<Status> LostPartner(const CollectiveKey& key, const State& state) const;

  const std::string self_;
  const SendPartial send_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<CollectiveKey, State> states_;     // guarded by mu_
  std::map<std::string, Status> lost_hosts_;  // by data endpoint; guarded by mu_
  Status stopping_;                           // not OK once stopped; guarded by mu_
};

}  // namespace atl::executor
