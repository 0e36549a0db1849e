#include "services/objectstore/waiting_reads.h"

namespace atl::store {

std::optional<TimePoint> WaitingReads::Add(uint64_t object, uint32_t shard, ReplyTo to,
                                           bool inline_data, uint32_t timeout_ms, TimePoint now,
                                           bool pin) {
  const TimePoint deadline = now + std::chrono::milliseconds(timeout_ms);
  reads_.emplace(ShardKey{object, shard},
                 Read{std::move(to), inline_data, timeout_ms, deadline, pin});
  if (armed_ && *armed_ <= deadline) return std::nullopt;
  armed_ = deadline;
  return deadline;
}

bool WaitingReads::Waits(uint64_t object, uint32_t shard) const {
  return reads_.contains(ShardKey{object, shard});
}

std::vector<WaitingReads::Read> WaitingReads::TakeShard(uint64_t object, uint32_t shard) {
  std::vector<Read> taken;
  auto [begin, end] = reads_.equal_range(ShardKey{object, shard});
  for (auto it = begin; it != end; ++it) taken.push_back(std::move(it->second));
  reads_.erase(begin, end);
  return taken;
}

std::vector<WaitingReads::Taken> WaitingReads::TakeObject(uint64_t object) {
  std::vector<Taken> taken;
  auto it = reads_.lower_bound(ShardKey{object, 0});
  while (it != reads_.end() && it->first.first == object) {
    taken.push_back({object, it->first.second, std::move(it->second)});
    it = reads_.erase(it);
  }
  return taken;
}

WaitingReads::Expiry WaitingReads::Expire(TimePoint now) {
  Expiry expiry;
  for (auto it = reads_.begin(); it != reads_.end();) {
    const TimePoint deadline = it->second.deadline;
    if (deadline > now) {
      if (!expiry.arm_at || deadline < *expiry.arm_at) expiry.arm_at = deadline;
      ++it;
      continue;
    }
    expiry.expired.push_back({it->first.first, it->first.second, std::move(it->second)});
    it = reads_.erase(it);
  }
  armed_ = expiry.arm_at;  // the firing disarmed the one-shot timer
  return expiry;
}

}  // namespace atl::store
