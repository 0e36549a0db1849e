#include "services/executor/collective_hub.h"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/arithmetic.h"
#include "kernels/cast.h"

namespace atl::executor {

GangLayout::GangLayout(std::vector<std::string> endpoints) : shard_endpoints(std::move(endpoints)) {
  hosts = shard_endpoints;
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
}

size_t GangLayout::HostIndex(const std::string& endpoint) const {
  auto it = std::lower_bound(hosts.begin(), hosts.end(), endpoint);
  return it != hosts.end() && *it == endpoint ? static_cast<size_t>(it - hosts.begin())
                                              : hosts.size();
}

CollectiveHub::CollectiveHub(std::string self_endpoint, Send send,
                             std::chrono::milliseconds timeout, size_t all_pairs_max_hosts)
    : self_(std::move(self_endpoint)),
      send_(std::move(send)),
      timeout_(timeout),
      all_pairs_max_hosts_(all_pairs_max_hosts) {}

Result<Tensor> CollectiveHub::SumInOrder(const std::vector<const Result<Tensor>*>& parts) {
  for (const auto* p : parts) {
    if (!p->ok()) return p->status();
  }
  Tensor sum = parts.front()->value();
  for (size_t i = 1; i < parts.size(); ++i) {
    ATOLL_ASSIGN_OR_RETURN(sum, kernels::Binary(kernels::BinaryFn::kAdd, sum, parts[i]->value()));
  }
  return sum;
}

CollectiveHub::State& CollectiveHub::StateOf(const CollectiveKey& key, const GangLayout& layout) {
  State& st = states_[key];
  if (st.local_expected == 0) {
    st.local_expected = static_cast<size_t>(
        std::count(layout.shard_endpoints.begin(), layout.shard_endpoints.end(), self_));
    st.hosts = layout.hosts;
    st.self = layout.HostIndex(self_);
    st.rooted = layout.hosts.size() > all_pairs_max_hosts_;
    st.readers_left = st.local_expected;
  }
  return st;
}

Result<Tensor> CollectiveHub::AllReduceSum(const CollectiveKey& key, const GangLayout& layout,
                                           uint32_t shard, Tensor local) {
  const DType dtype = local.dtype();
  if (ClassOf(dtype) != DTypeClass::kStorage) return Reduce(key, layout, shard, std::move(local));
  ATOLL_ASSIGN_OR_RETURN(Tensor wide, kernels::Cast(local, DType::kF32));
  ATOLL_ASSIGN_OR_RETURN(Tensor total, Reduce(key, layout, shard, std::move(wide)));
  return kernels::Cast(total, dtype);
}

Result<Tensor> CollectiveHub::Reduce(const CollectiveKey& key, const GangLayout& layout,
                                     uint32_t shard, Tensor local) {
  const size_t self_index = layout.HostIndex(self_);
  if (self_index == layout.hosts.size() || shard >= layout.shard_endpoints.size() ||
      layout.shard_endpoints[shard] != self_) {
    return Internal(
        fmt::format("shard {} of run {} node {} is not on this host", shard, key.run, key.node));
  }
  std::unique_lock lock(mu_);
  State& st = StateOf(key, layout);
  // A lost partner's partial never comes: the gang fails now instead of after the timeout.
  if (!st.total) {
    if (auto lost = LostPartner(key, st)) st.total = *std::move(lost);
  }
  if (!st.total && !stopping_.ok()) st.total = stopping_;
  if (!st.total) st.local.emplace(shard, std::move(local));
  if (!st.total && st.local.size() == st.local_expected) {
    // This host's partial, summed in shard order; it goes to every other host (all-pairs)
    // or to the root.
    std::vector<Result<Tensor>> values;
    for (auto& [s, t] : st.local) values.emplace_back(std::move(t));
    std::vector<const Result<Tensor>*> parts;
    for (const auto& v : values) parts.push_back(&v);
    Result<Tensor> partial = SumInOrder(parts);
    st.local.clear();
    if (partial.ok()) {
      std::vector<const std::string*> to;
      for (size_t h = 0; h < layout.hosts.size(); ++h) {
        if (st.PartialGoesTo(h)) to.push_back(&layout.hosts[h]);
      }
      lock.unlock();
      for (const std::string* host : to) {
        send_(*host, key, CollectiveValue::kPartial, static_cast<uint32_t>(self_index), *partial);
      }
      lock.lock();
    }
    states_[key].host_partials.emplace(static_cast<uint32_t>(self_index), std::move(partial));
  }
  State& state = states_[key];  // the map may have changed while unlocked
  const bool done = cv_.wait_for(lock, timeout_, [&] {
    return state.total.has_value() ||
           (state.SumsHere() && state.host_partials.size() == state.hosts.size());
  });
  if (!done) {
    const size_t have = state.host_partials.size();
    if (--state.readers_left == 0) states_.erase(key);
    return DeadlineExceeded(
        fmt::format("all-reduce of run {} node {} op {}: {} of {} hosts contributed within {} ms",
                    key.run, key.node, key.op, have, layout.hosts.size(), timeout_.count()));
  }
  if (!state.total) {
    std::vector<const Result<Tensor>*> parts;
    for (const auto& [h, p] : state.host_partials) parts.push_back(&p);
    state.total = SumInOrder(parts);
    cv_.notify_all();
  }
  if (state.is_root()) SendTotal(key, state, lock);
  Result<Tensor> out = *state.total;
  if (--state.readers_left == 0) states_.erase(key);
  return out;
}

void CollectiveHub::SendTotal(const CollectiveKey& key, State& state,
                              std::unique_lock<std::mutex>& lock) {
  if (state.sent_total) return;
  state.sent_total = true;
  const Result<Tensor> total = *state.total;
  const std::vector<std::string> hosts = state.hosts;
  lock.unlock();
  for (size_t h = 1; h < hosts.size(); ++h) send_(hosts[h], key, CollectiveValue::kTotal, 0, total);
  lock.lock();
}

std::optional<Status> CollectiveHub::LostPartner(const CollectiveKey& key,
                                                 const State& state) const {
  for (size_t h = 0; h < state.hosts.size(); ++h) {
    if (h == state.self || !state.Awaits(h)) continue;
    auto lost = lost_hosts_.find(state.hosts[h]);
    if (lost == lost_hosts_.end() || state.host_partials.count(static_cast<uint32_t>(h))) continue;
    return lost->second.WithContext(
        fmt::format("all-reduce of run {} node {} op {}", key.run, key.node, key.op));
  }
  return std::nullopt;
}

void CollectiveHub::HostLost(const std::string& endpoint, const Status& why) {
  {
    std::lock_guard lock(mu_);
    lost_hosts_.insert_or_assign(endpoint, why);
    for (auto& [key, state] : states_) {
      if (state.total) continue;
      if (auto lost = LostPartner(key, state)) state.total = *std::move(lost);
    }
  }
  cv_.notify_all();
}

void CollectiveHub::Abandon(const CollectiveKey& key, const GangLayout& layout, uint32_t shard,
                            const Status& why) {
  const size_t self_index = layout.HostIndex(self_);
  if (self_index == layout.hosts.size() || shard >= layout.shard_endpoints.size()) return;
  // Once per host: the first of its shards to fail decides its partial, which goes where
  // its partial would have gone; at a root, it is the gang's total.
  std::vector<std::pair<std::string, CollectiveValue>> tell;
  {
    std::lock_guard lock(mu_);
    State& st = StateOf(key, layout);
    if (!st.host_partials.count(static_cast<uint32_t>(self_index))) {
      st.host_partials.emplace(static_cast<uint32_t>(self_index), why);
      for (size_t h = 0; h < layout.hosts.size(); ++h) {
        if (st.PartialGoesTo(h)) tell.emplace_back(layout.hosts[h], CollectiveValue::kPartial);
      }
    }
    if (!st.total) st.total = why;
    if (st.is_root() && !st.sent_total) {
      st.sent_total = true;
      for (size_t h = 1; h < layout.hosts.size(); ++h) {
        tell.emplace_back(layout.hosts[h], CollectiveValue::kTotal);
      }
    }
    if (--st.readers_left == 0) states_.erase(key);  // this shard reads no total
  }
  cv_.notify_all();
  for (const auto& [host, what] : tell) {
    send_(host, key, what, static_cast<uint32_t>(self_index), why);
  }
}

void CollectiveHub::Stop(const Status& why) {
  {
    std::lock_guard lock(mu_);
    stopping_ = why;
    for (auto& [key, state] : states_) {
      if (!state.total) state.total = why;
    }
  }
  cv_.notify_all();
}

void CollectiveHub::HostBack(const std::string& endpoint) {
  std::lock_guard lock(mu_);
  lost_hosts_.erase(endpoint);
}

void CollectiveHub::Deposit(const CollectiveKey& key, uint32_t from_host, Result<Tensor> partial) {
  {
    std::lock_guard lock(mu_);
    states_[key].host_partials.emplace(from_host, std::move(partial));
  }
  cv_.notify_all();
}

void CollectiveHub::DepositTotal(const CollectiveKey& key, Result<Tensor> total) {
  {
    std::lock_guard lock(mu_);
    State& st = states_[key];
    if (!st.total) st.total = std::move(total);
  }
  cv_.notify_all();
}

}  // namespace atl::executor
