// HeldDispatches: dispatches an executor cannot admit yet because they name functions the
// RM is still to compile here. A restarted executor comes back on its old ports, where a
// scheduler's dispatches may already wait, and the RM compiles its functions again only
// after it registered (RegisterExecutorReply::functions_coming): those dispatches arrive
// before their Compile. Failing their shards at once would strand the rest of each gang in
// its collectives until their timeout, holding their devices; so they wait, bounded, for
// the Compile. A function nobody is compiling here fails at once, as ever.
//
// Dispatches leave in arrival order, and one held keeps every later one behind it: the
// executor queues shards on each device in gang order, and a later gang admitted ahead of
// a held one could run its collectives before the held one's partners, which wait for it.
// The functions stop being awaited `[executor] compile_wait_ms` after registering; what is
// held then leaves, and the shards of functions that never came fail (NotFound) as they
// would have at once. What they hold of argument values (inline inputs) is bounded too:
// a dispatch that would take it past `max_bytes` is given up as it comes. Its entries carry
// ResourceExhausted, its values are dropped, and it is held, in its place, to fail its
// shards when it leaves.
//
// Pure logic, times given by the caller (any steady clock, microseconds). Not thread-safe:
// the executor's loop owns it.
//
// Example:
//   HeldDispatches held(config.held_dispatch_bytes);
//   held.Expect(reply.functions_coming, now + wait);
//   if (held.MustHold(d, compiled, now)) (void)held.Add(d, s); else admit(d);
//   ... after a Compile, and periodically:
//   for (auto& h : held.TakeReady(compiled, now)) admit(h.dispatch, h.scheduler);
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "atoll/status.h"
#include "common/proto/protocol.h"

namespace atl::executor {

// Whether a function is compiled on this host.
using IsCompiled = std::function<bool(uint64_t function_id)>;

class HeldDispatches {
 public:
  struct Held {
    proto::Dispatch dispatch;
    std::string scheduler;  // the routing id it came from
    uint64_t bytes = 0;     // of argument values
  };

  explicit HeldDispatches(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // The RM compiles `functions` here next; they are awaited until `until_us`.
  void Expect(const std::vector<uint64_t>& functions, int64_t until_us);

  bool empty() const { return held_.empty(); }
  size_t size() const { return held_.size(); }
  // Bytes of argument values held.
  uint64_t bytes() const { return bytes_; }

  // Whether `dispatch` must wait: one is held already, or an entry of it that is to run (no
  // error from its scheduler) names an awaited function not `compiled` yet.
  bool MustHold(const proto::Dispatch& dispatch, const IsCompiled& compiled, int64_t now_us) const;
  // Holds `dispatch`, from `scheduler`, behind those held already; past the bound, given up
  // (see above). Returns what gave it up, or OK.
  Status Add(proto::Dispatch dispatch, std::string scheduler);
  // The dispatches to admit now, in arrival order: from the front, each that waits for no
  // function any more, up to the first that still does.
  std::vector<Held> TakeReady(const IsCompiled& compiled, int64_t now_us);
  // The held entries of run `run` carry `why` as their scheduler's error, so that they fail
  // with it when admitted (as a cancelled run's queued shards do). Returns how many.
  size_t FailRun(uint64_t run, const Status& why);

 private:
  // Whether an entry of `dispatch` that is to run names an awaited function not compiled.
  bool AwaitsFunction(const proto::Dispatch& dispatch, const IsCompiled& compiled,
                      int64_t now_us) const;

  const uint64_t max_bytes_;
  uint64_t bytes_ = 0;
  std::set<uint64_t> awaited_;
  int64_t awaited_until_us_ = 0;
  std::deque<Held> held_;
};

}  // namespace atl::executor
