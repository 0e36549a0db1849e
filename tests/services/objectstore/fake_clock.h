// A store Clock that moves only when a test says, for lease and collection deadlines.
#pragma once

#include <chrono>

#include "services/objectstore/clock.h"

namespace atl::store {

class FakeClock final : public Clock {
 public:
  TimePoint Now() const override { return now_; }
  void Advance(std::chrono::milliseconds by) { now_ += by; }

 private:
  TimePoint now_{};
};

}  // namespace atl::store
