// Walking N-D indices of row-major tensors: their strides, and the next index in row-major
// order. Internal to the kernel library (the lax kernels' gathers, windows and copies).
#pragma once

#include <cstdint>
#include <vector>

#include "atoll/tensor.h"

namespace atl::kernels::internal {

// Row-major strides of `shape`, in elements.
inline std::vector<int64_t> RowMajorStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// A row-major shape seen around one axis: `outer` blocks of `extent` x `inner` elements.
// Products, never a quotient of the element count: any dimension may be 0.
struct AroundAxis {
  int64_t outer = 1, extent = 1, inner = 1;
};
inline AroundAxis SplitAround(const Shape& shape, size_t axis) {
  AroundAxis split;
  for (size_t d = 0; d < shape.size(); ++d) {
    (d < axis ? split.outer : d == axis ? split.extent : split.inner) *= shape[d];
  }
  return split;
}

// Steps `index` through `shape` in row-major order; false after the last.
inline bool NextIndex(std::vector<int64_t>& index, const Shape& shape) {
  for (size_t d = shape.size(); d-- > 0;) {
    if (++index[d] < shape[d]) return true;
    index[d] = 0;
  }
  return false;
}

}  // namespace atl::kernels::internal
