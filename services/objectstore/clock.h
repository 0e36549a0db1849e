// The clock the object directory reads for client liveness, behind an interface so that a
// test can move time by hand instead of sleeping.
#pragma once

#include <chrono>

namespace atl::store {

using TimePoint = std::chrono::steady_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

// The monotonic system clock; what the service uses.
class SteadyClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
};

}  // namespace atl::store
