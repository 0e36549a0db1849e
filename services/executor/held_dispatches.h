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
// A dispatch that has waited longer than the bound leaves anyway; the shards of functions
// that never came then fail (NotFound) as they would have at once.
//
// Pure logic, times given by the caller (any steady clock, microseconds). Not thread-safe:
// the executor's loop owns it.
//
// Example:
//   HeldDispatches held(2'000'000);
//   if (held.empty() && !NamesComingFunction(d, coming)) admit(d) else held.Add(d, s, now);
//   ... after a Compile, and periodically:
//   for (auto& h : held.TakeReady(coming, now)) admit(h.dispatch, h.scheduler);
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "atoll/status.h"
#include "common/proto/protocol.h"

namespace atl::executor {

// Whether a function is to be compiled on this host and has not been yet.
using IsComing = std::function<bool(uint64_t function_id)>;

// True when an entry of `dispatch` that is to run (no error from its scheduler) names a
// function still `coming`.
bool NamesComingFunction(const proto::Dispatch& dispatch, const IsComing& coming);

class HeldDispatches {
 public:
  struct Held {
    proto::Dispatch dispatch;
    std::string scheduler;  // the routing id it came from
    int64_t since_us = 0;
  };

  // A dispatch waits at most `wait_us` for its functions.
  explicit HeldDispatches(int64_t wait_us) : wait_us_(wait_us) {}

  bool empty() const { return held_.empty(); }
  size_t size() const { return held_.size(); }

  // Holds `dispatch`, from `scheduler`, behind those held already.
  void Add(proto::Dispatch dispatch, std::string scheduler, int64_t now_us);
  // The dispatches to admit now, in arrival order: from the front, each that names no
  // function still coming or that has waited longer than the bound, up to the first that
  // waits on.
  std::vector<Held> TakeReady(const IsComing& coming, int64_t now_us);
  // The held entries of run `run` carry `why` as their scheduler's error, so that they fail
  // with it when admitted (as a cancelled run's queued shards do). Returns how many.
  size_t FailRun(uint64_t run, const Status& why);

 private:
  const int64_t wait_us_;
  std::deque<Held> held_;
};

}  // namespace atl::executor
