#include "services/executor/collective_hub.h"

#include <fmt/format.h>

#include "kernels/cast.h"

namespace atl::executor {

CollectiveHub::CollectiveHub(std::string self_endpoint, Send send,
                             std::chrono::milliseconds timeout, size_t all_pairs_max_hosts,
                             std::chrono::microseconds wait_spin)
    : self_(std::move(self_endpoint)),
      send_(std::move(send)),
      timeout_(timeout),
      all_pairs_max_hosts_(all_pairs_max_hosts),
      cv_(wait_spin) {}

bool CollectiveHub::State::HeardFrom(uint32_t h) const {
  if (plan && plan->rooted && !plan->is_root()) return totals.has_value();
  return messages.count(h) != 0;
}

size_t CollectiveHub::State::Heard() const {
  size_t heard = 0;
  for (uint32_t h : awaited) heard += HeardFrom(h) ? 1 : 0;
  return heard;
}

std::string CollectiveHub::Describe(const CollectiveKey& key, const State& state) {
  return fmt::format("{} of run {} node {} op {}",
                     state.op ? state.op->name() : std::string_view("collective"), key.run,
                     key.node, key.op);
}

CollectiveHub::State& CollectiveHub::StateOf(const CollectiveKey& key, const GangLayout& layout,
                                             const CollectiveOp& op) {
  State& st = states_[key];
  if (!st.plan) {
    st.op = op;
    st.plan =
        PlanFor(op, layout, static_cast<uint32_t>(layout.HostIndex(self_)), all_pairs_max_hosts_);
    st.hosts = layout.hosts;
    st.readers_left = st.plan->local_shards.size();
    for (const auto& [h, keys] : st.plan->receives) st.awaited.push_back(h);
    if (!st.plan->totals.empty()) st.awaited.push_back(0);
  }
  return st;
}

Result<Tensor> CollectiveHub::Run(const CollectiveKey& key, const GangLayout& layout,
                                  const CollectiveOp& op, uint32_t shard, Tensor local) {
  const DType dtype = local.dtype();
  if (!op.Reduces() || ClassOf(dtype) != DTypeClass::kStorage) {
    return RunComputed(key, layout, op, shard, std::move(local));
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor wide, kernels::Cast(local, DType::kF32));
  ATOLL_ASSIGN_OR_RETURN(Tensor block, RunComputed(key, layout, op, shard, std::move(wide)));
  return kernels::Cast(block, dtype);
}

Result<Tensor> CollectiveHub::RunComputed(const CollectiveKey& key, const GangLayout& layout,
                                          const CollectiveOp& op, uint32_t shard, Tensor local) {
  if (layout.HostIndex(self_) == layout.hosts.size() || shard >= layout.shard_endpoints.size() ||
      layout.shard_endpoints[shard] != self_) {
    return Internal(
        fmt::format("shard {} of run {} node {} is not on this host", shard, key.run, key.node));
  }
  MutexLock lock(mu_);
  State& st = StateOf(key, layout, op);  // a map's elements stay put while others come and go
  // A lost partner's message never comes: the collective fails now instead of after the
  // timeout.
  if (!st.Complete()) {
    if (auto lost = LostPartner(key, st)) st.failed = *std::move(lost);
  }
  if (!st.Complete() && !stopping_.ok()) st.failed = stopping_;
  if (!st.Complete() && !st.made) {
    st.dtype = local.dtype();
    st.block = local.shape();
    st.local.emplace(shard, std::move(local));
    if (st.local.size() == st.plan->local_shards.size()) {
      Status made = AddOwnItems(*st.op, layout, *st.plan, std::move(st.local), st.items);
      st.local.clear();
      st.made = made.ok();
      if (!made.ok()) st.failed = made.WithContext(Describe(key, st));
    }
  }
  std::vector<Outgoing> outgoing = TakeOutgoing(st);
  if (!outgoing.empty()) {
    lock.Unlock();
    SendAll(key, std::move(outgoing));
    lock.Lock();
  }
  const bool done = cv_.WaitFor(lock.native(), timeout_, [&] {
    return st.Complete() || (st.made && st.Heard() == st.awaited.size());
  });
  if (!done && !st.made) {
    st.failed = DeadlineExceeded(
        fmt::format("{}: {} of its {} shards on this host came within {} ms", Describe(key, st),
                    st.local.size(), st.plan->local_shards.size(), timeout_.count()));
  } else if (!done) {
    st.failed = DeadlineExceeded(
        fmt::format("{}: heard from {} of the {} hosts it waits for within {} ms",
                    Describe(key, st), st.Heard(), st.awaited.size(), timeout_.count()));
  }
  if (!st.Complete()) {
    Status assembled = Assemble(st, layout);
    if (!assembled.ok()) st.failed = assembled.WithContext(Describe(key, st));
  }
  cv_.NotifyAll();
  // Errors in place of its items, when it failed before they went; a root's totals.
  outgoing = TakeOutgoing(st);
  if (!outgoing.empty()) {
    lock.Unlock();
    SendAll(key, std::move(outgoing));
    lock.Lock();
  }
  // Each local shard reads its own result once: it takes it.
  Result<Tensor> out = st.results ? Result<Tensor>(std::move(st.results->at(shard))) : *st.failed;
  if (--st.readers_left == 0) states_.erase(key);
  return out;
}

Status CollectiveHub::Assemble(State& st, const GangLayout& layout) {
  const CollectiveOp& op = *st.op;
  const HostPlan& plan = *st.plan;
  const Shape item_shape = ItemShape(op, st.block);
  for (const auto& [h, keys] : plan.receives) {
    Result<Tensor>& message = st.messages.at(h);
    ATOLL_RETURN_IF_ERROR(message.status());
    ATOLL_RETURN_IF_ERROR(
        Unpack(op, std::move(message).value(), h, keys, st.dtype, item_shape, st.items));
  }
  std::map<ItemKey, Tensor> totals;
  if (!plan.totals.empty()) {
    ATOLL_RETURN_IF_ERROR(st.totals->status());
    ItemValues from_root;
    ATOLL_RETURN_IF_ERROR(
        Unpack(op, std::move(*st.totals).value(), 0, plan.totals, st.dtype, item_shape, from_root));
    for (auto& [at, value] : from_root) totals.emplace(at.second, std::move(value));
  }
  ATOLL_ASSIGN_OR_RETURN(auto results,
                         LocalResults(op, layout, plan, st.items, totals, st.dtype, st.block));
  if (plan.is_root()) {
    // The totals each other host needs, each slot reduced once.
    ItemValues values;
    for (const auto& [h, keys] : plan.total_sends) {
      for (const ItemKey& slot : keys) {
        if (values.count({0, slot})) continue;
        ATOLL_ASSIGN_OR_RETURN(values[std::pair(0u, slot)], SlotValue(op, layout, st.items, slot));
      }
      ATOLL_ASSIGN_OR_RETURN(st.totals_out[h], Pack(values, 0, keys));
    }
  }
  st.results = std::move(results);
  st.items.clear();
  return Status::Ok();
}

std::vector<CollectiveHub::Outgoing> CollectiveHub::TakeOutgoing(State& st) {
  std::vector<Outgoing> out;
  if (!st.sent && (st.made || st.failed)) {
    st.sent = true;
    for (const auto& [h, keys] : st.plan->sends) {
      if (lost_hosts_.count(st.hosts[h])) continue;
      // Once it failed, its items would be of no use: the error goes in their place.
      out.push_back({&st.hosts[h], CollectiveValue::kPartial, st.plan->self,
                     st.failed ? Result<Tensor>(*st.failed) : Pack(st.items, st.plan->self, keys)});
    }
  }
  if (st.plan->is_root() && !st.sent_totals && st.Complete()) {
    st.sent_totals = true;
    for (const auto& [h, keys] : st.plan->total_sends) {
      if (lost_hosts_.count(st.hosts[h])) continue;
      out.push_back({&st.hosts[h], CollectiveValue::kTotal, 0,
                     st.failed ? Result<Tensor>(*st.failed) : std::move(st.totals_out.at(h))});
    }
    st.totals_out.clear();
  }
  return out;
}

void CollectiveHub::SendAll(const CollectiveKey& key, std::vector<Outgoing> out) {
  for (Outgoing& message : out) {
    send_(*message.to, key, message.what, message.from_host, std::move(message.value));
  }
}

std::optional<Status> CollectiveHub::LostPartner(const CollectiveKey& key,
                                                 const State& state) const {
  for (uint32_t h : state.awaited) {
    auto lost = lost_hosts_.find(state.hosts[h]);
    if (lost == lost_hosts_.end() || state.HeardFrom(h)) continue;
    return lost->second.WithContext(Describe(key, state));
  }
  return std::nullopt;
}

void CollectiveHub::HostLost(const std::string& endpoint, const Status& why) {
  {
    MutexLock lock(mu_);
    lost_hosts_.insert_or_assign(endpoint, why);
    for (auto& [key, state] : states_) {
      if (state.Complete() || !state.plan) continue;
      if (auto lost = LostPartner(key, state)) state.failed = *std::move(lost);
    }
  }
  cv_.NotifyAll();
}

void CollectiveHub::CancelRun(uint64_t run, const Status& why) {
  {
    MutexLock lock(mu_);
    for (auto& [key, state] : states_) {
      if (key.run == run && !state.Complete()) state.failed = why;
    }
  }
  cv_.NotifyAll();
}

void CollectiveHub::HostBack(const std::string& endpoint) {
  MutexLock lock(mu_);
  lost_hosts_.erase(endpoint);
}

void CollectiveHub::Abandon(const CollectiveKey& key, const GangLayout& layout,
                            const CollectiveOp& op, uint32_t shard, const Status& why) {
  if (layout.HostIndex(self_) == layout.hosts.size() || shard >= layout.shard_endpoints.size()) {
    return;
  }
  {
    MutexLock lock(mu_);
    State& st = StateOf(key, layout, op);
    // The first of its shards to fail decides; a collective complete already keeps its
    // results for the shards that read them.
    if (!st.Complete()) st.failed = why;
    std::vector<Outgoing> out = TakeOutgoing(st);
    if (!out.empty()) {
      lock.Unlock();
      SendAll(key, std::move(out));
      lock.Lock();
    }
    if (--st.readers_left == 0) states_.erase(key);  // this shard reads no result
  }
  cv_.NotifyAll();
}

void CollectiveHub::Stop(const Status& why) {
  {
    MutexLock lock(mu_);
    stopping_ = why;
    for (auto& [key, state] : states_) {
      if (!state.Complete()) state.failed = why;
    }
  }
  cv_.NotifyAll();
}

void CollectiveHub::Deposit(const CollectiveKey& key, uint32_t from_host, Result<Tensor> items) {
  {
    MutexLock lock(mu_);
    State& st = states_[key];
    // An error fails the collective at once; a value waits for assembly.
    if (!items.ok() && !st.Complete()) st.failed = items.status();
    st.messages.emplace(from_host, std::move(items));
  }
  cv_.NotifyAll();
}

void CollectiveHub::DepositTotal(const CollectiveKey& key, Result<Tensor> totals) {
  {
    MutexLock lock(mu_);
    State& st = states_[key];
    if (!totals.ok() && !st.Complete()) st.failed = totals.status();
    if (!st.totals) st.totals = std::move(totals);
  }
  cv_.NotifyAll();
}

proto::TupleHeader CollectiveHub::TupleOf(const CollectiveKey& key, CollectiveValue what,
                                          uint32_t from_host) {
  proto::TupleHeader h;
  h.kind = what == CollectiveValue::kTotal ? proto::TupleHeader::kCollectiveTotal
                                           : proto::TupleHeader::kCollective;
  h.run_id = key.run;
  h.node = key.node;
  h.input = key.op;
  h.shard = from_host;
  return h;
}

void CollectiveHub::Receive(const proto::TupleHeader& h, Result<Tensor> value) {
  const CollectiveKey key{h.run_id, h.node, h.input};
  if (h.kind == proto::TupleHeader::kCollectiveTotal) {
    DepositTotal(key, std::move(value));
  } else {
    Deposit(key, h.shard, std::move(value));
  }
}

}  // namespace atl::executor
