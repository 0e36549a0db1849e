// The jax.lax primitives that reduce: reduce_max/min/prod/and/or over any dimensions, argmax
// and argmin, and dot_general (its batched products on OpenBLAS for f32 and f64).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

#include <cblas.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/base/dtype_types.h"
#include "kernels/check.h"
#include "kernels/lax.h"
#include "kernels/nd_index.h"
#include "kernels/wrapping.h"

namespace atl::kernels {

namespace {

template <typename T>
constexpr bool kComputes = !std::is_same_v<T, BF16> && !std::is_same_v<T, F16>;

// For each element of `x` (row-major), the offset of the result element it reduces into:
// the dimensions in `axes` are left out of the result's index.
std::vector<int64_t> ResultOffsets(const Shape& shape, const std::vector<int64_t>& axes,
                                   Shape& result) {
  result.clear();
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t a : axes) reduced[a] = true;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) result.push_back(shape[d]);
  }
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

// `x` as a tensor of `to` (the operands of a dot_general with a preferred element type).
template <typename To>
Tensor Widened(const Tensor& x, DType to) {
  Tensor out(to, x.shape());
  To* w = out.as<To>().data();
  VisitDType(x.dtype(), [&](auto zero) {
    using From = decltype(zero);
    if constexpr (kComputes<From>) {
      const From* v = x.as<From>().data();
      for (int64_t i = 0; i < x.num_elements(); ++i) w[i] = static_cast<To>(v[i]);
    }
  });
  return out;
}

// c[b] = a[b] x b[b] for each of `batch` [m,k] x [k,n] products, in T.
template <typename T>
void BatchedProduct(const T* a, const T* b, T* c, int64_t batch, int64_t m, int64_t k, int64_t n,
                    bool trans_a, bool trans_b) {
  // a is [m, k], or [k, m] when trans_a; b is [k, n], or [n, k] when trans_b: BLAS reads
  // either layout, so an operand laid out the other way needs no copy.
  const int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  const auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  for (int64_t p = 0; p < batch; ++p) {
    const T* ap = a + p * m * k;
    const T* bp = b + p * k * n;
    T* cp = c + p * m * n;
    if (m == 0 || n == 0) continue;
    if (k == 0) {
      std::fill(cp, cp + m * n, T{0});
      continue;
    }
    if constexpr (std::is_same_v<T, float>) {
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, ap, lda, bp, ldb, 0.0f, cp, n);
    } else if constexpr (std::is_same_v<T, double>) {
      cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, ap, lda, bp, ldb, 0.0, cp, n);
    } else {
      // Integers wrap (computed unsigned); bool is no operand here.
      using U = std::make_unsigned_t<T>;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          U sum = 0;
          for (int64_t q = 0; q < k; ++q) {
            const T x = trans_a ? ap[q * lda + i] : ap[i * lda + q];
            const T y = trans_b ? bp[j * ldb + q] : bp[q * ldb + j];
            sum += static_cast<U>(x) * static_cast<U>(y);
          }
          cp[i * n + j] = static_cast<T>(sum);
        }
      }
    }
  }
}

// The dimensions of a rank-`rank` operand that are in neither list.
std::vector<int64_t> FreeDims(size_t rank, const std::vector<int64_t>& a,
                              const std::vector<int64_t>& b) {
  std::vector<int64_t> free;
  for (int64_t d = 0; d < static_cast<int64_t>(rank); ++d) {
    if (std::find(a.begin(), a.end(), d) == a.end() &&
        std::find(b.begin(), b.end(), d) == b.end()) {
      free.push_back(d);
    }
  }
  return free;
}

int64_t DimsProduct(const Shape& shape, const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= shape[d];
  return p;
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
  const std::vector<int64_t> offsets = ResultOffsets(x.shape(), axes, shape);
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(x.dtype(), shape));
  Status status = Status::Ok();
  VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!kComputes<T>) {
      status = InvalidArgument(
          fmt::format("reduce takes no {}: it is computed in f32", DTypeName(x.dtype())));
    } else {
      T* acc = out.as<T>().data();
      std::fill(acc, acc + out.num_elements(), Identity<T>(fn));
      const T* v = x.as<T>().data();
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
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(index, result_shape));
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

Result<Tensor> DotGeneral(const Tensor& lhs, const Tensor& rhs, const DotDims& dims, DType out) {
  const Shape& ls = lhs.shape();
  const Shape& rs = rhs.shape();
  const std::vector<int64_t> lfree = FreeDims(ls.size(), dims.lhs_contracting, dims.lhs_batch);
  const std::vector<int64_t> rfree = FreeDims(rs.size(), dims.rhs_contracting, dims.rhs_batch);
  // lhs as [batch, m, k] or [batch, k, m], rhs as [batch, k, n] or [batch, n, k]: an operand
  // already in one of its two layouts is used as it is (BLAS transposes as it reads); any
  // other is copied into the first.
  auto concat = [](std::vector<int64_t> a, const std::vector<int64_t>& b,
                   const std::vector<int64_t>& c) {
    a.insert(a.end(), b.begin(), b.end());
    a.insert(a.end(), c.begin(), c.end());
    return a;
  };
  auto identity = [](const std::vector<int64_t>& perm) {
    for (size_t i = 0; i < perm.size(); ++i) {
      if (perm[i] != static_cast<int64_t>(i)) return false;
    }
    return true;
  };
  const std::vector<int64_t> lperm = concat(dims.lhs_batch, lfree, dims.lhs_contracting);
  const std::vector<int64_t> rperm = concat(dims.rhs_batch, dims.rhs_contracting, rfree);
  const bool trans_a =
      !identity(lperm) && identity(concat(dims.lhs_batch, dims.lhs_contracting, lfree));
  const bool trans_b =
      !identity(rperm) && identity(concat(dims.rhs_batch, rfree, dims.rhs_contracting));
  std::optional<Tensor> a_moved, b_moved;
  if (!identity(lperm) && !trans_a) {
    ATOLL_ASSIGN_OR_RETURN(a_moved.emplace(), TransposeNd(lhs, lperm));
  }
  if (!identity(rperm) && !trans_b) {
    ATOLL_ASSIGN_OR_RETURN(b_moved.emplace(), TransposeNd(rhs, rperm));
  }
  const Tensor& a = a_moved ? *a_moved : lhs;
  const Tensor& b = b_moved ? *b_moved : rhs;
  const int64_t batch = DimsProduct(ls, dims.lhs_batch);
  const int64_t m = DimsProduct(ls, lfree);
  const int64_t k = DimsProduct(ls, dims.lhs_contracting);
  const int64_t n = DimsProduct(rs, rfree);
  if (k != DimsProduct(rs, dims.rhs_contracting) || batch != DimsProduct(rs, dims.rhs_batch)) {
    return InvalidArgument(fmt::format("dot_general: {} and {} do not contract",
                                       internal::Describe(lhs), internal::Describe(rhs)));
  }
  Shape shape;
  for (int64_t d : dims.lhs_batch) shape.push_back(ls[d]);
  for (int64_t d : lfree) shape.push_back(ls[d]);
  for (int64_t d : rfree) shape.push_back(rs[d]);
  ATOLL_ASSIGN_OR_RETURN(Tensor result, internal::Allocate(out, shape));
  Status status = Status::Ok();
  VisitDType(out, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!kComputes<T> || std::is_same_v<T, bool>) {
      status = InvalidArgument(fmt::format("dot_general does not compute in {}", DTypeName(out)));
    } else {
      std::optional<Tensor> wa, wb;
      if (a.dtype() != out) wa = Widened<T>(a, out);
      if (b.dtype() != out) wb = Widened<T>(b, out);
      BatchedProduct((wa ? *wa : a).template as<T>().data(), (wb ? *wb : b).template as<T>().data(),
                     result.as<T>().data(), batch, m, k, n, trans_a, trans_b);
    }
  });
  ATOLL_RETURN_IF_ERROR(status);
  return result;
}

}  // namespace atl::kernels
