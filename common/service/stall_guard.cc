#include "common/service/stall_guard.h"

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

namespace atl {

StallGuard::StallGuard(std::string who, Clock::duration check_period, Clock::duration heartbeat,
                       uint32_t liveness, Clock::time_point start)
    : who_(std::move(who)),
      late_(check_period + heartbeat),
      lapse_(heartbeat * liveness),
      last_check_(start) {}

bool StallGuard::MayJudge(Clock::time_point now) {
  const Clock::duration since = now - last_check_;
  if (since > late_) {
    using std::chrono::duration_cast, std::chrono::milliseconds;
    spdlog::warn("{} did not run for {} ms: it judges no peer's silence for {} ms", who_,
                 duration_cast<milliseconds>(since).count(),
                 duration_cast<milliseconds>(lapse_).count());
    QuietUntil(now + lapse_);
  }
  last_check_ = now;
  return now >= quiet_until_;
}

void StallGuard::QuietUntil(Clock::time_point until) {
  quiet_until_ = std::max(quiet_until_, until);
}

}  // namespace atl
