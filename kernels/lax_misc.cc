// The jax.lax primitives that fit no family: integer_pow, the cumulative reductions,
// dynamic_slice and dynamic_update_slice, bitcast_convert_type.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include "common/base/dtype_types.h"
#include "kernels/check.h"
#include "kernels/lax.h"
#include "kernels/nd_index.h"
#include "kernels/wrapping.h"

namespace atl::kernels {

namespace {

template <typename T>
constexpr bool kLaxComputes =
    !std::is_same_v<T, BF16> && !std::is_same_v<T, F16> && !std::is_same_v<T, bool>;

// jax's _integer_pow: the multiplications of binary exponentiation, in its order.
template <typename T>
T PowBySquaring(T x, int64_t y) {
  if (y == 0) return T{1};
  const bool reciprocal = y < 0;
  uint64_t n = reciprocal ? static_cast<uint64_t>(-y) : static_cast<uint64_t>(y);
  bool have = false;
  T acc{};
  while (n > 0) {
    if (n & 1) {
      acc = have ? internal::WrappingMul(acc, x) : x;
      have = true;
    }
    n >>= 1;
    if (n > 0) x = internal::WrappingMul(x, x);
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (reciprocal) return T{1} / acc;
  }
  return acc;
}

template <typename T>
T Step(CumulativeFn fn, T acc, T v) {
  switch (fn) {
    case CumulativeFn::kSum:
      return internal::WrappingAdd(acc, v);
    case CumulativeFn::kProd:
      return internal::WrappingMul(acc, v);
    case CumulativeFn::kMax:
    case CumulativeFn::kMin:
      if constexpr (std::is_floating_point_v<T>) {
        if (acc != acc || v != v) return std::numeric_limits<T>::quiet_NaN();
      }
      return fn == CumulativeFn::kMax ? std::max(acc, v) : std::min(acc, v);
  }
  return acc;
}

int64_t StartOf(const Tensor& t) {
  if (t.dtype() == DType::kI32) return t.as<int32_t>()[0];
  return t.as<int64_t>()[0];
}

using internal::RowMajorStrides;

// Calls f(offset in the big tensor, offset in the block) for every element of a block of
// `block` at `starts` inside a tensor of `shape`.
template <typename F>
void ForBlock(const Shape& shape, const Shape& block, const std::vector<int64_t>& starts, F f) {
  const int64_t n = NumElements(block);
  if (n <= 0) return;
  const std::vector<int64_t> strides = RowMajorStrides(shape);
  std::vector<int64_t> index(block.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t at = 0;
    for (size_t d = 0; d < block.size(); ++d) at += (starts[d] + index[d]) * strides[d];
    f(at, i);
    for (size_t d = block.size(); d-- > 0;) {
      if (++index[d] < block[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

Result<Tensor> IntegerPow(const Tensor& x, int64_t y) {
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(x.dtype(), x.shape()));
  Status status =
      InvalidArgument(fmt::format("integer_pow does not take {}", DTypeName(x.dtype())));
  VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (kLaxComputes<T>) {
      const T* v = x.as<T>().data();
      T* z = out.as<T>().data();
      for (int64_t i = 0; i < x.num_elements(); ++i) z[i] = PowBySquaring(v[i], y);
      status = Status::Ok();
    }
  });
  ATOLL_RETURN_IF_ERROR(status);
  return out;
}

Result<Tensor> Cumulative(CumulativeFn fn, const Tensor& x, int64_t axis, bool reverse) {
  const Shape& shape = x.shape();
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size())) {
    return InvalidArgument(fmt::format("cumulative: axis {} of {}", axis, internal::Describe(x)));
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(x.dtype(), shape));
  const internal::AroundAxis around = internal::SplitAround(shape, static_cast<size_t>(axis));
  const int64_t outer = around.outer, extent = around.extent, inner = around.inner;
  Status status =
      InvalidArgument(fmt::format("cumulative ops do not take {}", DTypeName(x.dtype())));
  VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (kLaxComputes<T>) {
      const T* v = x.as<T>().data();
      T* z = out.as<T>().data();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          for (int64_t e = 0; e < extent; ++e) {
            const int64_t step = reverse ? extent - 1 - e : e;
            const int64_t at = (o * extent + step) * inner + i;
            const int64_t before = (o * extent + (reverse ? step + 1 : step - 1)) * inner + i;
            z[at] = e == 0 ? v[at] : Step(fn, z[before], v[at]);
          }
        }
      }
      status = Status::Ok();
    }
  });
  ATOLL_RETURN_IF_ERROR(status);
  return out;
}

std::vector<int64_t> ClampedStarts(const Shape& shape, const Shape& sizes,
                                   std::span<const Tensor* const> starts) {
  std::vector<int64_t> out(shape.size(), 0);
  for (size_t d = 0; d < shape.size() && d < starts.size() && d < sizes.size(); ++d) {
    out[d] = std::clamp<int64_t>(StartOf(*starts[d]), 0, shape[d] - sizes[d]);
  }
  return out;
}

Result<Tensor> DynamicSlice(const Tensor& x, std::span<const Tensor* const> starts,
                            const Shape& sizes) {
  if (starts.size() != x.shape().size() || sizes.size() != x.shape().size()) {
    return InvalidArgument(fmt::format("dynamic_slice: {} needs a start and a size per dimension",
                                       internal::Describe(x)));
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(x.dtype(), sizes));
  const std::vector<int64_t> at = ClampedStarts(x.shape(), sizes, starts);
  const size_t size = DTypeSize(x.dtype());
  ForBlock(x.shape(), sizes, at, [&](int64_t big, int64_t small) {
    std::memcpy(out.data() + small * size, x.data() + big * size, size);
  });
  return out;
}

Result<Tensor> DynamicUpdateSlice(const Tensor& x, const Tensor& update,
                                  std::span<const Tensor* const> starts) {
  if (starts.size() != x.shape().size() || update.dtype() != x.dtype() ||
      update.shape().size() != x.shape().size()) {
    return InvalidArgument(fmt::format("dynamic_update_slice: {} into {}",
                                       internal::Describe(update), internal::Describe(x)));
  }
  Tensor out = x;
  const std::vector<int64_t> at = ClampedStarts(x.shape(), update.shape(), starts);
  const size_t size = DTypeSize(x.dtype());
  ForBlock(x.shape(), update.shape(), at, [&](int64_t big, int64_t small) {
    std::memcpy(out.data() + big * size, update.data() + small * size, size);
  });
  return out;
}

Result<Tensor> BitcastConvertType(const Tensor& x, DType to) {
  if (DTypeSize(to) != DTypeSize(x.dtype())) {
    return InvalidArgument(fmt::format("bitcast_convert_type: {} to {} changes the width",
                                       internal::Describe(x), DTypeName(to)));
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(to, x.shape()));
  if (x.nbytes() > 0) std::memcpy(out.data(), x.data(), x.nbytes());
  return out;
}

}  // namespace atl::kernels
