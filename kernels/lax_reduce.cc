// The jax.lax primitives that reduce: reduce_max/min/prod/and/or over any dimensions, argmax
// and argmin (dot_general is lax_dot.cc).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/base/dtype_types.h"
#include "kernels/check.h"
#include "kernels/lax.h"
#include "kernels/nd_index.h"
#include "kernels/row_reduce.h"
#include "kernels/wrapping.h"

namespace atl::kernels {

namespace {

template <typename T>
constexpr bool kComputes = !std::is_same_v<T, BF16> && !std::is_same_v<T, F16>;

// For each element of `x` (row-major), the offset of the result element it reduces into:
// the dimensions in `axes` are left out of the result's index.
// `result` becomes `shape` without the dimensions in `axes`; returns which those are.
std::vector<bool> ResultShape(const Shape& shape, const std::vector<int64_t>& axes, Shape& result) {
  result.clear();
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t a : axes) reduced[a] = true;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) result.push_back(shape[d]);
  }
  return reduced;
}

std::vector<int64_t> ResultOffsets(const Shape& shape, const std::vector<int64_t>& axes,
                                   Shape& result) {
  const std::vector<bool> reduced = ResultShape(shape, axes, result);
  // The stride in the result of each of x's dimensions (0 for a reduced one).
  std::vector<int64_t> strides(shape.size(), 0);
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (reduced[d]) continue;
    strides[d] = stride;
    stride *= shape[d];
  }
  const int64_t n = NumElements(shape);
  std::vector<int64_t> offsets(static_cast<size_t>(n));
  std::vector<int64_t> index(shape.size(), 0);
  int64_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    offsets[i] = at;
    for (size_t d = shape.size(); d-- > 0;) {
      at += strides[d];
      if (++index[d] < shape[d]) break;
      at -= strides[d] * shape[d];
      index[d] = 0;
    }
  }
  return offsets;
}

template <typename T>
T Identity(LaxReduceFn fn) {
  switch (fn) {
    case LaxReduceFn::kMax:
      if constexpr (std::is_floating_point_v<T>) {
        return -std::numeric_limits<T>::infinity();
      } else {
        return std::numeric_limits<T>::lowest();
      }
    case LaxReduceFn::kMin:
      if constexpr (std::is_floating_point_v<T>) {
        return std::numeric_limits<T>::infinity();
      } else {
        return std::numeric_limits<T>::max();
      }
    case LaxReduceFn::kProd:
      return T{1};
    case LaxReduceFn::kAnd:
      if constexpr (std::is_same_v<T, bool>) {
        return true;
      } else if constexpr (std::is_integral_v<T>) {
        return static_cast<T>(~T{0});
      } else {
        return T{0};  // not a float reduction
      }
    case LaxReduceFn::kOr:
      return T{0};
  }
  return T{0};
}

template <typename T>
T Combine(LaxReduceFn fn, T acc, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return fn == LaxReduceFn::kMax || fn == LaxReduceFn::kOr ? (acc || v) : (acc && v);
  } else {
    switch (fn) {
      case LaxReduceFn::kMax:
      case LaxReduceFn::kMin:
        if constexpr (std::is_floating_point_v<T>) {
          if (acc != acc || v != v) return std::numeric_limits<T>::quiet_NaN();
        }
        return fn == LaxReduceFn::kMax ? std::max(acc, v) : std::min(acc, v);
      case LaxReduceFn::kProd:
        return internal::WrappingMul(acc, v);
      case LaxReduceFn::kAnd:
        if constexpr (std::is_integral_v<T>) return static_cast<T>(acc & v);
        break;
      case LaxReduceFn::kOr:
        if constexpr (std::is_integral_v<T>) return static_cast<T>(acc | v);
        break;
    }
    return acc;
  }
}

// `axes` as one block of x's dimensions, x seen as [outer, extent, inner] around it, when
// they are consecutive (reduce over the last axis, over the middle ones); nullopt otherwise.
std::optional<internal::AroundAxis> ConsecutiveAxes(const Shape& shape, std::vector<int64_t> axes) {
  if (axes.empty()) return std::nullopt;
  std::sort(axes.begin(), axes.end());
  for (size_t i = 1; i < axes.size(); ++i) {
    if (axes[i] != axes[i - 1] + 1) return std::nullopt;
  }
  internal::AroundAxis block;
  for (size_t d = 0; d < shape.size(); ++d) {
    const auto at = static_cast<int64_t>(d);
    (at < axes.front() ? block.outer : at <= axes.back() ? block.extent : block.inner) *= shape[d];
  }
  return block;
}

// Reduces v, seen as [outer, extent, inner], over its middle into acc [outer, inner]: rows
// of inner values combined in place, or (inner 1) each contiguous row in vector lanes.
template <typename T>
void ReduceBlock(LaxReduceFn fn, const T* v, T* acc, const internal::AroundAxis& block) {
  const bool extreme = fn == LaxReduceFn::kMax || fn == LaxReduceFn::kMin;
  for (int64_t o = 0; o < block.outer; ++o) {
    const T* in = v + o * block.extent * block.inner;
    T* out = acc + o * block.inner;
    if constexpr (!std::is_same_v<T, bool>) {
      if (block.inner == 1 && extreme) {
        *out = fn == LaxReduceFn::kMax ? internal::RowExtreme<true>(in, block.extent)
                                       : internal::RowExtreme<false>(in, block.extent);
        continue;
      }
    }
    std::fill(out, out + block.inner, Identity<T>(fn));
    for (int64_t e = 0; e < block.extent; ++e) {
      const T* row = in + e * block.inner;
      for (int64_t i = 0; i < block.inner; ++i) out[i] = Combine(fn, out[i], row[i]);
    }
  }
}

}  // namespace

Result<Tensor> ReduceAxes(LaxReduceFn fn, const Tensor& x, const std::vector<int64_t>& axes) {
  for (int64_t a : axes) {
    if (a < 0 || a >= static_cast<int64_t>(x.shape().size())) {
      return InvalidArgument(
          fmt::format("reduce: axes [{}] of {}", fmt::join(axes, ","), internal::Describe(x)));
    }
  }
  Shape shape;
  const std::optional<internal::AroundAxis> block = ConsecutiveAxes(x.shape(), axes);
  // Axes that are not one block take a result offset per element of x.
  std::vector<int64_t> offsets;
  if (block) {
    ResultShape(x.shape(), axes, shape);
  } else {
    offsets = ResultOffsets(x.shape(), axes, shape);
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(x.dtype(), shape));
  Status status = Status::Ok();
  VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!kComputes<T>) {
      status = InvalidArgument(
          fmt::format("reduce takes no {}: it is computed in f32", DTypeName(x.dtype())));
    } else {
      T* acc = out.as<T>().data();
      const T* v = x.as<T>().data();
      if (block) {
        ReduceBlock(fn, v, acc, *block);
        return;
      }
      std::fill(acc, acc + out.num_elements(), Identity<T>(fn));
      for (size_t i = 0; i < offsets.size(); ++i)
        acc[offsets[i]] = Combine(fn, acc[offsets[i]], v[i]);
    }
  });
  ATOLL_RETURN_IF_ERROR(status);
  return out;
}

Result<Tensor> ArgReduce(bool max, const Tensor& x, int64_t axis, DType index) {
  const Shape& shape = x.shape();
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size()) || shape[axis] == 0 ||
      (index != DType::kI32 && index != DType::kI64)) {
    return InvalidArgument(fmt::format("{}: axis {} of {} into {}", max ? "argmax" : "argmin", axis,
                                       internal::Describe(x), DTypeName(index)));
  }
  Shape result_shape;
  ResultOffsets(shape, {axis}, result_shape);
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(index, result_shape));
  const internal::AroundAxis around = internal::SplitAround(shape, static_cast<size_t>(axis));
  const int64_t outer = around.outer, extent = around.extent, inner = around.inner;
  Status status = Status::Ok();
  VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!kComputes<T>) {
      status = InvalidArgument("argmax takes no storage dtype: it is computed in f32");
    } else {
      const T* v = x.as<T>().data();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          int64_t best = 0;
          T best_value = v[o * extent * inner + i];
          for (int64_t e = 1; e < extent; ++e) {
            const T value = v[(o * extent + e) * inner + i];
            bool better = max ? value > best_value : value < best_value;
            if constexpr (std::is_floating_point_v<T>) {
              if (best_value != best_value) break;  // the first NaN wins
              better = better || value != value;
            }
            if (better) {
              best = e;
              best_value = value;
            }
          }
          const int64_t at = o * inner + i;
          if (index == DType::kI32) {
            out.as<int32_t>()[at] = static_cast<int32_t>(best);
          } else {
            out.as<int64_t>()[at] = best;
          }
        }
      }
    }
  });
  ATOLL_RETURN_IF_ERROR(status);
  return out;
}

}  // namespace atl::kernels
