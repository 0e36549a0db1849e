// Top-k along the last axis. Pure; never throws. Thread-safe.
#pragma once

#include <cstdint>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::kernels {

struct TopKResult {
  Tensor values;   // [..., k] of x's dtype, largest first
  Tensor indices;  // i32 [..., k], positions in the last axis of the input
};

// The k largest values of each row of `x` f32 or f64 [..., n] (rank >= 1), with 0 <= k <= n and
// n <= INT32_MAX. Sorted in descending order; equal values (including -0 and +0) are ordered
// by lower index first; NaN counts as larger than every number.
Result<TopKResult> TopK(const Tensor& x, int64_t k);

// The gradient of TopK's values: each row of dy [..., k] put at the positions TopK(x, k)
// chooses in that row of x [..., n] (f32 or f64, both alike), zero elsewhere.
Result<Tensor> TopKBackward(const Tensor& dy, const Tensor& x);

}  // namespace atl::kernels
