#include "kernels/spin.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

namespace atl::kernels {

Result<Tensor> Spin(Tensor input, double microseconds, const std::atomic<bool>* cancelled) {
  if (!(microseconds >= 0 && microseconds <= kMaxSpinMicros)) {
    return InvalidArgument(
        fmt::format("spin time must be in [0, {}] us, got {}", kMaxSpinMicros, microseconds));
  }
  using Clock = std::chrono::steady_clock;
  auto micros = [](double us) {
    return std::chrono::ceil<Clock::duration>(std::chrono::duration<double, std::micro>(us));
  };
  const auto start = Clock::now();
  const auto deadline = start + micros(microseconds);
  const auto check_every = micros(kSpinCancelCheckMicros);
  for (auto now = start; now < deadline;) {
    // Busy in slices: the device is occupied, and between slices it may be stopped.
    const auto slice_end = std::min(deadline, now + check_every);
    while ((now = Clock::now()) < slice_end) {
    }
    if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) {
      return Cancelled(
          fmt::format("spin cancelled after {} of {} us",
                      std::chrono::duration_cast<std::chrono::microseconds>(now - start).count(),
                      microseconds));
    }
  }
  return input;
}

}  // namespace atl::kernels
