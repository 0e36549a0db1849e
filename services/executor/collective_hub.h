// CollectiveHub: where the shards of a gang meet for collective ops. Shards on this host
// meet in memory and make the host's partial; the hosts' partials are then summed in host
// order (the gang's hosts sorted by endpoint), so every replica gets bit-identical results
// whichever way they travel:
//  - all-pairs, in a gang of at most `all_pairs_max_hosts` hosts: each host sends its
//    partial to every other host and sums them itself; one hop, hosts x (hosts - 1)
//    messages.
//  - rooted, in a larger gang: each host sends its partial to the gang's root (its first
//    host), which sums them and sends the total to every other host; two hops,
//    2 x (hosts - 1) messages, and each host but the root connects to the root alone.
// Either way messages grow with hosts, not with shards.
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

// What a host sends another in an all-reduce: its partial, or (the root) the total.
enum class CollectiveValue : uint8_t { kPartial, kTotal };

class CollectiveHub {
 public:
  // Gangs of up to this many hosts exchange partials all-pairs (one hop beats two while
  // the messages are few); larger ones reduce at a root.
  static constexpr size_t kAllPairsMaxHosts = 4;

  // Sends a value of this host's (its partial, or the gang's total when it is the root:
  // `what`) to another host of the gang (`endpoint`); `from_host` is this host's index in
  // the gang. Called with no lock held, from a device thread (or from Abandon's caller).
  using Send =
      std::function<void(const std::string& endpoint, const CollectiveKey& key,
                         CollectiveValue what, uint32_t from_host, const Result<Tensor>& value)>;

  CollectiveHub(std::string self_endpoint, Send send, std::chrono::milliseconds timeout,
                size_t all_pairs_max_hosts = kAllPairsMaxHosts);

  // Contributes shard `shard`'s tensor and waits (at most the hub's timeout) for the sum
  // over every shard of the gang. Fails at once, without contributing, when a host of the
  // gang whose partial has not come is lost (HostLost). bf16 and f16 are summed in f32 (the
  // partials and the total travel as f32) and rounded once by each reader, in the same
  // order everywhere, so that replicas stay bit-identical.
  Result<Tensor> AllReduceSum(const CollectiveKey& key, const GangLayout& layout, uint32_t shard,
                              Tensor local);
  // Shard `shard` failed before it reached all-reduce `key` (`why`): it will never
  // contribute, so the all-reduce fails with `why` on this host at once, and the gang's
  // other hosts get `why` as this host's partial instead of waiting for it.
  void Abandon(const CollectiveKey& key, const GangLayout& layout, uint32_t shard,
               const Status& why);
  // A partial from host `from_host` of the gang (or its error), from the data plane.
  void Deposit(const CollectiveKey& key, uint32_t from_host, Result<Tensor> partial);
  // The gang's total (or its error) from its root, from the data plane.
  void DepositTotal(const CollectiveKey& key, Result<Tensor> total);

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
    size_t self = 0;                                   // this host's index in `hosts`
    bool rooted = false;      // reduced at the root (hosts[0]) rather than all-pairs
    bool sent_total = false;  // the root sent its total (or error) to the other hosts
    size_t readers_left = 0;
    std::optional<Result<Tensor>> total;
    bool is_root() const { return rooted && self == 0; }
    // Whether this host sums the partials itself: all-pairs, or at the root.
    bool SumsHere() const { return !rooted || self == 0; }
    // Whom this host waits for: every host where it sums, else the root (for its total).
    bool Awaits(size_t host) const { return SumsHere() || host == 0; }
    // Whom this host sends its partial: every other host all-pairs, else the root (which
    // sends none).
    bool PartialGoesTo(size_t host) const {
      return host != self && (!rooted || (self != 0 && host == 0));
    }
  };
  // AllReduceSum of a tensor of a dtype the kernels add (not bf16 or f16).
  Result<Tensor> Reduce(const CollectiveKey& key, const GangLayout& layout, uint32_t shard,
                        Tensor local);
  // The all-reduce `key`'s state, made for `layout` on first use. Called with mu_ held.
  State& StateOf(const CollectiveKey& key, const GangLayout& layout);
  // Sums the values in key order; any error wins.
  static Result<Tensor> SumInOrder(const std::vector<const Result<Tensor>*>& parts);
  // At the root of a rooted gang, once its total is known: sends it to every other host,
  // once, unlocking `lock` meanwhile.
  void SendTotal(const CollectiveKey& key, State& state, std::unique_lock<std::mutex>& lock);
  // Why the all-reduce `key` cannot complete: a host it still waits for is lost. Nullopt
  // when none is. Called with mu_ held.
  std::optional<Status> LostPartner(const CollectiveKey& key, const State& state) const;

  const std::string self_;
  const Send send_;
  const std::chrono::milliseconds timeout_;
  const size_t all_pairs_max_hosts_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<CollectiveKey, State> states_;     // guarded by mu_
  std::map<std::string, Status> lost_hosts_;  // by data endpoint; guarded by mu_
  Status stopping_;                           // not OK once stopped; guarded by mu_
};

}  // namespace atl::executor
