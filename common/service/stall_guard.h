// StallGuard: judging a peer's silence only over time the judge itself ran. A service that
// checks its peers' heartbeats every `check_period` and finds its own check a heartbeat
// period late or more did not run in between: its process was paused, or its machine or
// container starved of CPU. What runs beside it likely stalled with it, and the messages
// its peers sent meanwhile may still be on their way in (its ZeroMQ I/O thread stalled
// too). So it judges nothing for a liveness lapse: every peer has that long to be heard.
// A peer that stays silent is judged a lapse later than it would have been.
//
// Not thread-safe: one per service loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace atl {

class StallGuard {
 public:
  using Clock = std::chrono::steady_clock;

  // `who` names the judge in the warning a stall logs ("the RM"); its peers heartbeat every
  // `heartbeat` and are judged after `liveness` silent periods (the lapse). The first check
  // is due a `check_period` after `start` (a stall before it counts too).
  StallGuard(std::string who, Clock::duration check_period, Clock::duration heartbeat,
             uint32_t liveness, Clock::time_point start = Clock::now());

  // Called at each check: whether silences may be judged at `now`. False for a lapse from
  // a check that came late, and until a time QuietUntil set.
  bool MayJudge(Clock::time_point now);
  // Judges nothing before `until` (a restarted RM gives its peers time to reconnect).
  void QuietUntil(Clock::time_point until);

 private:
  std::string who_;
  Clock::duration late_;  // a check this long after the one before it came late
  Clock::duration lapse_;
  Clock::time_point last_check_;
  Clock::time_point quiet_until_{};
};

}  // namespace atl
