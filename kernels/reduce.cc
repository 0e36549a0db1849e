#include "kernels/reduce.h"

#include <algorithm>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "kernels/check.h"
#include "kernels/row_reduce.h"

namespace atl::kernels {

std::string_view ReduceFnName(ReduceFn fn) {
  switch (fn) {
    case ReduceFn::kSum:
      return "sum";
    case ReduceFn::kMax:
      return "max";
    case ReduceFn::kMean:
      return "mean";
  }
  return "?";
}

namespace {

// Reduces the [outer, len, inner] view of `in` over its middle dimension into [outer, inner].
template <typename T>
void ReduceMiddle(ReduceFn fn, const T* in, T* dst, int64_t outer, int64_t len, int64_t inner) {
  if (inner == 1) {  // the last axis: one contiguous row per result, kept in vector lanes
    for (int64_t o = 0; o < outer; ++o) {
      const T* row = in + o * len;
      if (fn == ReduceFn::kMax) {
        dst[o] = internal::RowMax(row, len);
      } else {
        const double sum = internal::RowSum(row, len);
        dst[o] = static_cast<T>(fn != ReduceFn::kMean ? sum
                                : len == 0            ? std::numeric_limits<double>::quiet_NaN()
                                                      : sum * (1.0 / static_cast<double>(len)));
      }
    }
    return;
  }
  if (fn == ReduceFn::kMax) {
    for (int64_t o = 0; o < outer; ++o) {
      T* acc = dst + o * inner;
      std::fill_n(acc, inner, -std::numeric_limits<T>::infinity());
      for (int64_t r = 0; r < len; ++r) {
        const T* row = in + (o * len + r) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          acc[i] = (row[i] > acc[i] || row[i] != row[i]) ? row[i] : acc[i];
        }
      }
    }
    return;
  }
  // Sum and mean: rows of `inner` values are added in double, so a long axis keeps its
  // precision; the inner loop over contiguous values vectorizes.
  std::vector<double> acc(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t r = 0; r < len; ++r) {
      const T* row = in + (o * len + r) * inner;
      for (int64_t i = 0; i < inner; ++i) acc[i] += row[i];
    }
    const double scale = fn == ReduceFn::kMean ? 1.0 / static_cast<double>(len) : 1.0;
    for (int64_t i = 0; i < inner; ++i) {
      dst[o * inner + i] = static_cast<T>(len == 0 && fn == ReduceFn::kMean
                                              ? std::numeric_limits<double>::quiet_NaN()
                                              : acc[i] * scale);
    }
  }
}

}  // namespace

Result<Tensor> Reduce(ReduceFn fn, const Tensor& x, int64_t axis) {
  const std::string_view name = ReduceFnName(fn);
  if (name == "?")
    return InvalidArgument(fmt::format("unknown reduction {}", static_cast<int>(fn)));
  const std::string what = fmt::format("reduce_{}", name);
  ATOLL_RETURN_IF_ERROR(internal::CheckFloat(x, what + " operand"));
  if (x.shape().empty()) {
    return InvalidArgument(
        fmt::format("{} needs a tensor of rank >= 1, got {}", what, internal::Describe(x)));
  }
  ATOLL_ASSIGN_OR_RETURN(const int a, internal::NormalizeAxis(axis, x.shape().size(), what));
  Shape out_shape = x.shape();
  out_shape.erase(out_shape.begin() + a);
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(x.dtype(), out_shape));
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < a; ++d) outer *= x.shape()[d];
  for (size_t d = a + 1; d < x.shape().size(); ++d) inner *= x.shape()[d];
  internal::ForFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    ReduceMiddle(fn, x.as<T>().data(), out.as<T>().data(), outer, x.shape()[a], inner);
  });
  return out;
}

}  // namespace atl::kernels
