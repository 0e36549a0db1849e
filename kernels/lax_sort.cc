// jax.lax.sort: a stable sort of each row along a dimension, keyed by the first operands
// lexicographically, applied to one operand.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>

#include <fmt/format.h>

#include "common/base/dtype_types.h"
#include "kernels/check.h"
#include "kernels/lax.h"
#include "kernels/nd_index.h"

namespace atl::kernels {

namespace {

// -1, 0 or 1 as a orders before, with or after b in jax's sort order: floats totally ordered
// with -0 equal to 0 and every NaN after every number (and NaNs equal among themselves).
template <typename T>
int Compare(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool an = a != a, bn = b != b;
    if (an || bn) return an == bn ? 0 : an ? 1 : -1;
  }
  return a < b ? -1 : b < a ? 1 : 0;
}

// The comparison of elements i and j of one operand.
using ElementCompare = int (*)(const Tensor&, int64_t, int64_t);

template <typename T>
int CompareElements(const Tensor& t, int64_t i, int64_t j) {
  const T* v = t.as<T>().data();
  return Compare(v[i], v[j]);
}

// nullptr for a dtype the kernel does not compute in (bf16 and f16 come widened to f32).
ElementCompare CompareOf(DType dtype) {
  ElementCompare out = nullptr;
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_same_v<T, BF16> && !std::is_same_v<T, F16>) {
      out = &CompareElements<T>;
    }
  });
  return out;
}

}  // namespace

Result<Tensor> Sort(std::span<const Tensor* const> xs, int64_t dim, int64_t keys, int64_t output) {
  if (xs.empty() || keys < 1 || keys > static_cast<int64_t>(xs.size()) || output < 0 ||
      output >= static_cast<int64_t>(xs.size())) {
    return InvalidArgument("sort: keys and output must index the operands");
  }
  const Shape& shape = xs[0]->shape();
  if (dim < 0 || dim >= static_cast<int64_t>(shape.size())) {
    return InvalidArgument(
        fmt::format("sort: dimension {} of {}", dim, internal::Describe(*xs[0])));
  }
  std::vector<ElementCompare> compares;
  for (int64_t k = 0; k < keys; ++k) {
    if (xs[k]->shape() != shape) return InvalidArgument("sort: operands differ in shape");
    compares.push_back(CompareOf(xs[k]->dtype()));
    if (compares.back() == nullptr) {
      return InvalidArgument(
          fmt::format("sort takes no {} keys (computed in f32)", DTypeName(xs[k]->dtype())));
    }
  }
  const Tensor& x = *xs[output];
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(x.dtype(), x.shape()));
  const size_t size = DTypeSize(x.dtype());
  const internal::AroundAxis around = internal::SplitAround(shape, static_cast<size_t>(dim));
  const int64_t outer = around.outer, extent = around.extent, inner = around.inner;
  std::vector<int64_t> order(static_cast<size_t>(extent));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * extent * inner + i;
      std::iota(order.begin(), order.end(), int64_t{0});
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        for (int64_t k = 0; k < keys; ++k) {
          const int c = compares[k](*xs[k], base + a * inner, base + b * inner);
          if (c != 0) return c < 0;
        }
        return false;
      });
      for (int64_t e = 0; e < extent; ++e) {
        std::memcpy(out.data() + (base + e * inner) * size,
                    x.data() + (base + order[e] * inner) * size, size);
      }
    }
  }
  return out;
}

}  // namespace atl::kernels
