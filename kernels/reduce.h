// Reductions of an f32 or f64 tensor over one axis: sum, max, mean. The axis is removed from the
// shape (no keep-dims). Pure; never throws. Thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::kernels {

enum class ReduceFn : uint8_t { kSum, kMax, kMean };
std::string_view ReduceFnName(ReduceFn fn);  // "sum", "max", "mean"

// Reduces `x` (f32 or f64, rank >= 1) over `axis` (negative counts from the end): [2,3,4] over
// axis 1 gives [2,4]. Sums and means accumulate in double. Over an empty axis sum is 0,
// max is -inf and mean is nan. max propagates NaN.
Result<Tensor> Reduce(ReduceFn fn, const Tensor& x, int64_t axis);

inline Result<Tensor> ReduceSum(const Tensor& x, int64_t axis) {
  return Reduce(ReduceFn::kSum, x, axis);
}
inline Result<Tensor> ReduceMax(const Tensor& x, int64_t axis) {
  return Reduce(ReduceFn::kMax, x, axis);
}
inline Result<Tensor> ReduceMean(const Tensor& x, int64_t axis) {
  return Reduce(ReduceFn::kMean, x, axis);
}

}  // namespace atl::kernels
