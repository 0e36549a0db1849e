// WaitingReads: the object store's reads (GetObject with timeout_ms > 0) of shards that are
// not sealed yet. Each waits until its shard is sealed (TakeShard), until its object will
// never be sealed here (TakeObject: freed, collected, never created), or until its deadline
// (Expire), whichever comes first; the store answers what these return.
//
// One one-shot timer serves every deadline, so that an idle store does not tick: Add and
// Expire say when it must fire next, and only when that changes. A read answered early
// leaves the timer armed for its deadline; the firing then finds nothing due and re-arms
// for the earliest read left.
//
// Pure: no socket, no thread, no clock; `now` is given. Not thread-safe: the store's event
// loop owns it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "services/objectstore/clock.h"
#include "services/objectstore/reply_to.h"

namespace atl::store {

class WaitingReads {
 public:
  struct Read {
    ReplyTo to;
    bool inline_data = true;  // the reply carries the bytes
    uint32_t timeout_ms = 0;  // as asked, for the message when it runs out
    TimePoint deadline;
    bool pin = false;  // the reply leases the shard's memory (GetObject::pin)
  };
  // A read taken out, with the shard it waited for.
  struct Taken {
    uint64_t object = 0;
    uint32_t shard = 0;
    Read read;
  };
  // What a firing of the timer found.
  struct Expiry {
    std::vector<Taken> expired;       // their deadline has come: answer DeadlineExceeded
    std::optional<TimePoint> arm_at;  // when the timer must fire next; empty: leave it idle
  };

  // Adds a read of (object, shard) that gives up `timeout_ms` after `now`. Returns when the
  // timer must fire now, if that is earlier than it is armed for (empty: leave it).
  std::optional<TimePoint> Add(uint64_t object, uint32_t shard, ReplyTo to, bool inline_data,
                               uint32_t timeout_ms, TimePoint now, bool pin = false);
  // Whether a read waits for (object, shard).
  bool Waits(uint64_t object, uint32_t shard) const;
  // Takes the reads of (object, shard), in arrival order: it is sealed, answer them.
  std::vector<Read> TakeShard(uint64_t object, uint32_t shard);
  // Takes the reads of every shard of `object`: it will never be sealed here.
  std::vector<Taken> TakeObject(uint64_t object);
  // The timer fired at `now`: takes the reads whose deadline has come, and says when the
  // timer must fire for the earliest left.
  Expiry Expire(TimePoint now);

  size_t size() const { return reads_.size(); }

 private:
  using ShardKey = std::pair<uint64_t, uint32_t>;  // (object, shard)

  std::multimap<ShardKey, Read> reads_;
  std::optional<TimePoint> armed_;  // when the timer fires; empty: disarmed
};

}  // namespace atl::store
