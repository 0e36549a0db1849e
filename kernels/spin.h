// Spin: a device kept busy for a given time (the IR's kSpin), the stand-in for a kernel of
// known duration in benchmarks and tests. Thread-safe: no shared state.
#pragma once

#include <atomic>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::kernels {

// Longest time Spin accepts: one hour, in microseconds.
inline constexpr double kMaxSpinMicros = 3600e6;

// How often a spin looks at its cancel flag, at most.
inline constexpr double kSpinCancelCheckMicros = 1000;

// Keeps the calling thread busy for `microseconds` (a busy-wait on steady_clock: it models
// a device occupied by a kernel, so the thread must not sleep) and returns `input`
// unchanged. 0 returns at once; negative, NaN or more than kMaxSpinMicros is
// InvalidArgument. Once `cancelled` (optional) is set, returns Cancelled within
// kSpinCancelCheckMicros.
Result<Tensor> Spin(Tensor input, double microseconds,
                    const std::atomic<bool>* cancelled = nullptr);

}  // namespace atl::kernels
