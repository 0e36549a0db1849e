// CollectiveHub: where the shards of a gang meet for collective ops (ir::IsCollective). Shards
// on this host meet in memory and make the host's items (its partials, or its shards' pieces);
// hosts then exchange them along the op's plan (collective_plan.h), which sorts the gang's
// hosts by endpoint so that every host computes the same order:
//  - all-pairs: each host sends each other host, in one message, the items that host's shards
//    need, and computes its shards' results itself; one hop.
//  - rooted, for a reducing op over more than `all_pairs_max_hosts` hosts: each host sends its
//    partials to the gang's root (its first host), which reduces them and sends each host the
//    totals it needs; two hops, 2 x (hosts - 1) messages, and each host but the root connects
//    to the root alone.
// Either way messages grow with hosts, not with shards, and every replica of a reduction gets
// the same bits (partials reduced in host order, each in shard order).
//
// Failures end a collective on every host at once rather than at the timeout: a shard that
// fails before it runs (Abandon), a lost host, a stopping executor, a timeout or an error
// from another host fails the collective here and is sent where this host's items would have
// gone (and by a root as its totals).
//
// Thread-safe: device threads call Run and Abandon; the executor's loop calls Deposit.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "atoll/tensor.h"
#include "common/base/mutex.h"
#include "common/base/spin_condition.h"
#include "common/proto/executor_messages.h"
#include "services/executor/collective_items.h"
#include "services/executor/collective_plan.h"

namespace atl::executor {

// One collective op of one gang: (run, node, op index).
struct CollectiveKey {
  uint64_t run = 0;
  uint32_t node = 0;
  uint32_t op = 0;
  auto operator<=>(const CollectiveKey&) const = default;
};

// What a host sends another in a collective: its items (partials or pieces), or (a root) the
// totals the other host needs.
enum class CollectiveValue : uint8_t { kPartial, kTotal };

class CollectiveHub {
 public:
  // Gangs of up to this many hosts exchange partials all-pairs (one hop beats two while
  // the messages are few); larger ones reduce at a root.
  static constexpr size_t kAllPairsMaxHosts = 4;

  // Sends a message of this host's (its items, or the totals when it is the root: `what`) to
  // another host of the gang (`endpoint`); `from_host` is this host's index in the gang.
  // Called with no lock held, from a device thread.
  using Send = std::function<void(const std::string& endpoint, const CollectiveKey& key,
                                  CollectiveValue what, uint32_t from_host, Result<Tensor> value)>;

  // `wait_spin`: how long a shard waiting for the others looks again before it sleeps.
  CollectiveHub(std::string self_endpoint, Send send, std::chrono::milliseconds timeout,
                size_t all_pairs_max_hosts = kAllPairsMaxHosts,
                std::chrono::microseconds wait_spin = std::chrono::microseconds(0));

  // Contributes shard `shard`'s block `local` to collective `key` (`op` over the gang
  // `layout`) and waits (at most the hub's timeout) for the shard's block of the result.
  // Fails at once, without contributing, when a host whose message it needs is lost
  // (HostLost) or the hub stopped. A reducing op over bf16 or f16 reduces in f32 (the items
  // travel as f32) and each reader rounds its block once, in the same order everywhere, so
  // that replicas stay bit-identical.
  Result<Tensor> Run(const CollectiveKey& key, const GangLayout& layout, const CollectiveOp& op,
                     uint32_t shard, Tensor local);
  // Shard `shard` failed before it reached collective `key` (`why`): it will never
  // contribute, so the collective fails with `why` on this host at once, and the hosts this
  // host would have sent items (or totals) get `why` instead of waiting for them.
  void Abandon(const CollectiveKey& key, const GangLayout& layout, const CollectiveOp& op,
               uint32_t shard, const Status& why);
  // Host `from_host`'s items for this host (or its error), from the data plane.
  void Deposit(const CollectiveKey& key, uint32_t from_host, Result<Tensor> items);
  // The totals this host needs (or their error) from the gang's root, from the data plane.
  void DepositTotal(const CollectiveKey& key, Result<Tensor> totals);
  // The data plane's framing of the messages above: the header of the tuple that carries a
  // message of Send's to another host, and, there, a received tuple whose header is
  // collective() deposited as Deposit or DepositTotal.
  static proto::TupleHeader TupleOf(const CollectiveKey& key, CollectiveValue what,
                                    uint32_t from_host);
  void Receive(const proto::TupleHeader& h, Result<Tensor> value);

  // The host with data endpoint `endpoint` was lost (`why`, which names it): every
  // collective still missing its message fails now with `why`, and so does every later one
  // that needs it, until HostBack.
  void HostLost(const std::string& endpoint, const Status& why);
  void HostBack(const std::string& endpoint);
  // Run `run` was cancelled (`why`): its collectives waiting here fail now. A shard of it
  // that has not reached one yet stops at its next op (its cancel flag).
  void CancelRun(uint64_t run, const Status& why);
  // The executor is stopping: every collective waiting now, and every later one, fails
  // with `why` at once, so that device threads can be joined.
  void Stop(const Status& why);

 private:
  struct State {
    std::optional<CollectiveOp> op;  // with the plan, from this host's first shard
    std::optional<HostPlan> plan;
    std::vector<std::string> hosts;    // the gang's, as in GangLayout::hosts
    std::vector<uint32_t> awaited;     // the hosts whose messages it needs
    std::map<uint32_t, Tensor> local;  // blocks by shard, until the host's items are made
    DType dtype = DType::kF32;         // of this host's blocks
    Shape block;
    bool made = false;  // this host's items are in `items`
    ItemValues items;   // this host's items, and at assembly those received
    std::map<uint32_t, Result<Tensor>> messages;  // from other hosts, by host index
    std::optional<Result<Tensor>> totals;         // from the root
    bool sent = false;                            // this host's messages went (or errors)
    bool sent_totals = false;                     // the root's totals went (or errors)
    std::optional<Status> failed;
    std::optional<std::map<uint32_t, Tensor>> results;  // by local shard
    std::map<uint32_t, Tensor> totals_out;              // the root's, by host
    size_t readers_left = 0;

    bool Complete() const { return failed || results; }
    // Whether host `h`'s message (the root's totals, for a rooted gang's other hosts) came.
    bool HeardFrom(uint32_t h) const;
    // How many of the awaited hosts were heard from.
    size_t Heard() const;
  };
  // The collective `key`'s state, with its plan for `op` over `layout` made on first use.
  State& StateOf(const CollectiveKey& key, const GangLayout& layout, const CollectiveOp& op)
      REQUIRES(mu_);
  // Run, for a block of a dtype the kernels compute in (not bf16 or f16 when `op` reduces).
  Result<Tensor> RunComputed(const CollectiveKey& key, const GangLayout& layout,
                             const CollectiveOp& op, uint32_t shard, Tensor local);
  // A message of this host's to another: its items (or a root's totals) for the host with
  // data endpoint `*to`, or the error in their place.
  struct Outgoing {
    const std::string* to;  // in State::hosts, which outlives the sending
    CollectiveValue what;
    uint32_t from_host;
    Result<Tensor> value;
  };
  // What this host has to send now, each message once: its items once they are made (or
  // errors once it failed) and, at the root of a complete collective, each host's totals
  // (or the error). The caller sends them with mu_ released (SendAll).
  std::vector<Outgoing> TakeOutgoing(State& st) REQUIRES(mu_);
  void SendAll(const CollectiveKey& key, std::vector<Outgoing> out) EXCLUDES(mu_);
  // Computes the local shards' results (and a root's totals) from everything heard.
  Status Assemble(State& st, const GangLayout& layout);
  // Why the collective `key` cannot complete: a host it still waits for is lost. Nullopt
  // when none is.
  std::optional<Status> LostPartner(const CollectiveKey& key, const State& state) const
      REQUIRES(mu_);
  // "all_gather of run R node N op I", for errors.
  static std::string Describe(const CollectiveKey& key, const State& state);

  const std::string self_;
  const Send send_;
  const std::chrono::milliseconds timeout_;
  const size_t all_pairs_max_hosts_;
  Mutex mu_;
  SpinCondition cv_;
  std::map<CollectiveKey, State> states_ GUARDED_BY(mu_);
  std::map<std::string, Status> lost_hosts_ GUARDED_BY(mu_);  // by data endpoint
  Status stopping_ GUARDED_BY(mu_);                           // not OK once stopped
};

}  // namespace atl::executor
