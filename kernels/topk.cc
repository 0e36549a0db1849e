#include "kernels/topk.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kernels/check.h"

namespace atl::kernels {

namespace {

// Each row's k best of `x` [rows, n] into `values` [rows, k] and `indices` i32 [rows, k].
template <typename T>
void TopKRows(const T* x, int64_t rows, int64_t n, int64_t k, T* values, int32_t* indices) {
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows && k > 0; ++r) {
    const T* row = x + r * n;
    // A strict weak order: NaN first (by index), then larger values, +0 before -0 (XLA's
    // top_k orders floats totally), then lower index.
    const auto before = [row](int32_t i, int32_t j) {
      const T a = row[i];
      const T b = row[j];
      const bool a_nan = std::isnan(a);
      const bool b_nan = std::isnan(b);
      if (a_nan || b_nan) return a_nan && b_nan ? i < j : a_nan;
      if (a != b) return a > b;
      if (std::signbit(a) != std::signbit(b)) return !std::signbit(a);
      return i < j;
    };
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
    T* v = values + r * k;
    int32_t* idx = indices + r * k;
    for (int64_t j = 0; j < k; ++j) {
      idx[j] = order[j];
      v[j] = row[order[j]];
    }
  }
}

}  // namespace

Result<TopKResult> TopK(const Tensor& x, int64_t k) {
  ATOLL_RETURN_IF_ERROR(internal::CheckFloat(x, "top-k operand"));
  if (x.shape().empty()) {
    return InvalidArgument(fmt::format(
        "top-k needs rank >= 1 (it works over the last axis), got {}", internal::Describe(x)));
  }
  const int64_t n = x.shape().back();
  if (n > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument(
        fmt::format("top-k: last axis of {} exceeds INT32_MAX (the indices are "
                    "i32)",
                    internal::Describe(x)));
  }
  if (k < 0 || k > n) {
    return InvalidArgument(
        fmt::format("top-k of {}: k = {}, expected 0 <= k <= {}", internal::Describe(x), k, n));
  }
  Shape out_shape = x.shape();
  out_shape.back() = k;
  ATOLL_ASSIGN_OR_RETURN(Tensor values, internal::Allocate(x.dtype(), out_shape));
  ATOLL_ASSIGN_OR_RETURN(Tensor indices, internal::Allocate(DType::kI32, out_shape));
  const int64_t rows = n == 0 ? 0 : x.num_elements() / n;
  internal::ForFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    TopKRows(x.as<T>().data(), rows, n, k, values.as<T>().data(), indices.as<int32_t>().data());
  });
  return TopKResult{std::move(values), std::move(indices)};
}

Result<Tensor> TopKBackward(const Tensor& dy, const Tensor& x) {
  ATOLL_RETURN_IF_ERROR(internal::CheckFloat(dy, "top-k backward dy"));
  const int64_t k = dy.shape().empty() ? -1 : dy.shape().back();
  ATOLL_ASSIGN_OR_RETURN(const TopKResult chosen, TopK(x, k));
  ATOLL_RETURN_IF_ERROR(
      internal::CheckTypeShape(dy, x.dtype(), chosen.values.shape(), "top-k backward dy"));
  ATOLL_ASSIGN_OR_RETURN(Tensor dx, internal::Allocate(x.dtype(), x.shape()));
  const int64_t n = x.shape().back();
  const int32_t* idx = chosen.indices.as<int32_t>().data();
  internal::ForFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* g = dy.as<T>().data();
    T* out = dx.as<T>().data();
    for (int64_t i = 0; i < dy.num_elements(); ++i) out[(i / k) * n + idx[i]] = g[i];
  });
  return dx;
}

}  // namespace atl::kernels
