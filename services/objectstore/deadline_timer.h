// DeadlineTimer: a one-shot Linux timerfd that becomes readable at a chosen steady_clock
// time, so an EventLoop (AddFd) can sleep until the next deadline instead of ticking.
//
// Not thread-safe: arm, clear and drain it from the loop that polls its fd.
#pragma once

#include "atoll/status.h"
#include "services/objectstore/clock.h"

namespace atl::store {

class DeadlineTimer {
 public:
  // Unavailable when the kernel refuses a timerfd.
  [[nodiscard]] static Result<DeadlineTimer> Create();

  DeadlineTimer(DeadlineTimer&& other) noexcept;
  DeadlineTimer& operator=(DeadlineTimer&& other) noexcept;
  DeadlineTimer(const DeadlineTimer&) = delete;
  DeadlineTimer& operator=(const DeadlineTimer&) = delete;
  ~DeadlineTimer();

  // The fd to poll for readability.
  int fd() const { return fd_; }

  // Fires once at `when` (at once if it has passed), replacing any earlier arming.
  void ArmAt(TimePoint when);
  // Disarms it; a firing not yet drained stays readable until Drain().
  void Clear();
  // Consumes a firing so that the fd stops being readable.
  void Drain();

 private:
  explicit DeadlineTimer(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace atl::store
