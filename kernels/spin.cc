#include "kernels/spin.h"

#include <chrono>

#include <fmt/format.h>

namespace atl::kernels {

Result<Tensor> Spin(Tensor input, double microseconds) {
  if (!(microseconds >= 0 && microseconds <= kMaxSpinMicros)) {
    return InvalidArgument(
        fmt::format("spin time must be in [0, {}] us, got {}", kMaxSpinMicros, microseconds));
  }
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::ceil<Clock::duration>(
                                           std::chrono::duration<double, std::micro>(microseconds));
  while (Clock::now() < deadline) {
    // Busy: the device is occupied.
  }
  return input;
}

}  // namespace atl::kernels
