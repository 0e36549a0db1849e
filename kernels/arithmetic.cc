#include "kernels/arithmetic.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include "kernels/binary_loop.h"
#include "kernels/check.h"

namespace atl::kernels {

using internal::CheckWellFormed;
using internal::Describe;

namespace {

Status CheckKnown(BinaryFn fn) {
  if (BinaryFnName(fn) != "?") return Status::Ok();
  return InvalidArgument(fmt::format("unknown binary op {}", static_cast<int>(fn)));
}

// out[i] = lhs(i) fn rhs(i) for i < n, where lhs and rhs read either a tensor or a scalar.
// An i32 division checks every divisor first, so that a zero fails the whole call.
template <typename T, typename Lhs, typename Rhs>
Status Compute(BinaryFn fn, int64_t n, Lhs lhs, Rhs rhs, T* out) {
  if constexpr (std::is_integral_v<T>) {
    if (fn == BinaryFn::kDiv) {
      for (int64_t i = 0; i < n; ++i) {
        if (rhs(i) == 0) {
          return InvalidArgument(fmt::format("integer division by zero (element {})", i));
        }
      }
    }
  }
  internal::BinaryLoop(fn, n, lhs, rhs, out);
  return Status::Ok();
}

// The scalar as a value of the tensor's dtype T.
template <typename T>
Result<T> ConvertScalar(double scalar, DType dtype) {
  if constexpr (std::is_integral_v<T>) {
    // [min, -min) holds the whole numbers of T's range; NaN fails both comparisons.
    constexpr double kMin = static_cast<double>(std::numeric_limits<T>::min());
    if (!(scalar >= kMin && scalar < -kMin) || std::trunc(scalar) != scalar) {
      return InvalidArgument(
          fmt::format("scalar {} is not a whole number in {} range, so it cannot be "
                      "applied to an {} tensor",
                      scalar, DTypeName(dtype), DTypeName(dtype)));
    }
  }
  return static_cast<T>(scalar);
}

// Dispatches on a well-formed tensor's dtype; `run` is called with a zero of the element
// type. bf16 and f16 are refused: their callers compute in f32.
template <typename Run>
Result<Tensor> ForDType(DType dtype, Run run) {
  Result<Tensor> out = InvalidArgument(
      fmt::format("arithmetic takes f32, f64, i32 or i64, got {}: a storage dtype is computed "
                  "on in f32 (cast it first)",
                  DTypeName(dtype)));
  internal::ForFloat(dtype, [&](auto zero) { out = run(zero); });
  internal::ForInteger(dtype, [&](auto zero) { out = run(zero); });
  return out;
}

}  // namespace

Result<Tensor> Binary(BinaryFn fn, const Tensor& lhs, const Tensor& rhs) {
  ATOLL_RETURN_IF_ERROR(CheckKnown(fn));
  ATOLL_RETURN_IF_ERROR(CheckWellFormed(lhs, "left operand"));
  ATOLL_RETURN_IF_ERROR(CheckWellFormed(rhs, "right operand"));
  if (lhs.dtype() != rhs.dtype() || lhs.shape() != rhs.shape()) {
    return InvalidArgument(
        fmt::format("{}: operands must have the same dtype and shape, got {} "
                    "and {}",
                    BinaryFnName(fn), Describe(lhs), Describe(rhs)));
  }
  return ForDType(lhs.dtype(), [&](auto zero) -> Result<Tensor> {
    using T = decltype(zero);
    ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(lhs.dtype(), lhs.shape()));
    const T* a = lhs.as<T>().data();
    const T* b = rhs.as<T>().data();
    ATOLL_RETURN_IF_ERROR(Compute<T>(
        fn, lhs.num_elements(), [a](int64_t i) { return a[i]; }, [b](int64_t i) { return b[i]; },
        out.as<T>().data()));
    return out;
  });
}

Result<Tensor> Binary(BinaryFn fn, const Tensor& lhs, double rhs) {
  ATOLL_RETURN_IF_ERROR(CheckKnown(fn));
  ATOLL_RETURN_IF_ERROR(CheckWellFormed(lhs, "left operand"));
  return ForDType(lhs.dtype(), [&](auto zero) -> Result<Tensor> {
    using T = decltype(zero);
    ATOLL_ASSIGN_OR_RETURN(const T s, ConvertScalar<T>(rhs, lhs.dtype()));
    ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(lhs.dtype(), lhs.shape()));
    const T* a = lhs.as<T>().data();
    ATOLL_RETURN_IF_ERROR(Compute<T>(
        fn, lhs.num_elements(), [a](int64_t i) { return a[i]; }, [s](int64_t) { return s; },
        out.as<T>().data()));
    return out;
  });
}

Result<Tensor> Binary(BinaryFn fn, double lhs, const Tensor& rhs) {
  ATOLL_RETURN_IF_ERROR(CheckKnown(fn));
  ATOLL_RETURN_IF_ERROR(CheckWellFormed(rhs, "right operand"));
  return ForDType(rhs.dtype(), [&](auto zero) -> Result<Tensor> {
    using T = decltype(zero);
    ATOLL_ASSIGN_OR_RETURN(const T s, ConvertScalar<T>(lhs, rhs.dtype()));
    ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(rhs.dtype(), rhs.shape()));
    const T* b = rhs.as<T>().data();
    ATOLL_RETURN_IF_ERROR(Compute<T>(
        fn, rhs.num_elements(), [s](int64_t) { return s; }, [b](int64_t i) { return b[i]; },
        out.as<T>().data()));
    return out;
  });
}

}  // namespace atl::kernels
