#include "compute/kernels.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include "kernels/check.h"

namespace atl::kernels {

using internal::CheckWellFormed;
using internal::Describe;

std::string_view BinaryOpName(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "add";
    case BinaryOp::kSub:
      return "sub";
    case BinaryOp::kMul:
      return "mul";
    case BinaryOp::kDiv:
      return "div";
  }
  return "?";
}

namespace {

// i32 arithmetic with wrap-around instead of undefined behaviour: computed on uint32_t,
// whose conversion back to int32_t is modular in C++20.
int32_t WrapAdd(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
int32_t WrapSub(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) - static_cast<uint32_t>(b));
}
int32_t WrapMul(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
}
// b != 0. INT32_MIN / -1 overflows (and traps on x86): wrap it like negation does.
int32_t WrapDiv(int32_t a, int32_t b) {
  return b == -1 ? static_cast<int32_t>(0u - static_cast<uint32_t>(a)) : a / b;
}

// out[i] = lhs(i) op rhs(i) for i < n, where lhs and rhs read either a tensor or a scalar.
// Kept as one loop per op so that the compiler can vectorize each.
template <typename T, typename Lhs, typename Rhs>
Status Compute(BinaryOp op, int64_t n, Lhs lhs, Rhs rhs, T* out) {
  switch (op) {
    case BinaryOp::kAdd:
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_integral_v<T>) {
          out[i] = WrapAdd(lhs(i), rhs(i));
        } else {
          out[i] = lhs(i) + rhs(i);
        }
      }
      return Status::Ok();
    case BinaryOp::kSub:
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_integral_v<T>) {
          out[i] = WrapSub(lhs(i), rhs(i));
        } else {
          out[i] = lhs(i) - rhs(i);
        }
      }
      return Status::Ok();
    case BinaryOp::kMul:
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_integral_v<T>) {
          out[i] = WrapMul(lhs(i), rhs(i));
        } else {
          out[i] = lhs(i) * rhs(i);
        }
      }
      return Status::Ok();
    case BinaryOp::kDiv:
      if constexpr (std::is_integral_v<T>) {
        for (int64_t i = 0; i < n; ++i) {
          if (rhs(i) == 0) {
            return InvalidArgument(fmt::format("i32 division by zero (element {})", i));
          }
        }
        for (int64_t i = 0; i < n; ++i) out[i] = WrapDiv(lhs(i), rhs(i));
      } else {
        for (int64_t i = 0; i < n; ++i) out[i] = lhs(i) / rhs(i);
      }
      return Status::Ok();
  }
  return InvalidArgument(fmt::format("unknown elementwise op {}", static_cast<int>(op)));
}

// The scalar as a value of the tensor's dtype T.
template <typename T>
Result<T> ConvertScalar(double scalar) {
  if constexpr (std::is_integral_v<T>) {
    constexpr double kMin = std::numeric_limits<T>::min();
    constexpr double kMax = std::numeric_limits<T>::max();
    if (!(scalar >= kMin && scalar <= kMax) || std::trunc(scalar) != scalar) {
      return InvalidArgument(
          fmt::format("scalar {} is not a whole number in i32 range, so it cannot be "
                      "applied to an i32 tensor",
                      scalar));
    }
  }
  return static_cast<T>(scalar);
}

// Dispatches on the dtype; `run` is called with a zero of the element type.
template <typename Run>
Result<Tensor> ForDType(DType dtype, Run run) {
  switch (dtype) {
    case DType::kF32:
      return run(float{});
    case DType::kI32:
      return run(int32_t{});
  }
  return InvalidArgument(fmt::format("unknown dtype {}", static_cast<int>(dtype)));
}

}  // namespace

Result<Tensor> Binary(BinaryOp op, const Tensor& lhs, const Tensor& rhs) {
  ATOLL_RETURN_IF_ERROR(CheckWellFormed(lhs, "left operand"));
  ATOLL_RETURN_IF_ERROR(CheckWellFormed(rhs, "right operand"));
  if (lhs.dtype() != rhs.dtype() || lhs.shape() != rhs.shape()) {
    return InvalidArgument(
        fmt::format("{}: operands must have the same dtype and shape, got {} "
                    "and {}",
                    BinaryOpName(op), Describe(lhs), Describe(rhs)));
  }
  return ForDType(lhs.dtype(), [&](auto zero) -> Result<Tensor> {
    using T = decltype(zero);
    Tensor out(lhs.dtype(), lhs.shape());
    const T* a = lhs.as<T>().data();
    const T* b = rhs.as<T>().data();
    ATOLL_RETURN_IF_ERROR(Compute<T>(
        op, lhs.num_elements(), [a](int64_t i) { return a[i]; }, [b](int64_t i) { return b[i]; },
        out.as<T>().data()));
    return out;
  });
}

Result<Tensor> Binary(BinaryOp op, const Tensor& lhs, double rhs) {
  ATOLL_RETURN_IF_ERROR(CheckWellFormed(lhs, "left operand"));
  return ForDType(lhs.dtype(), [&](auto zero) -> Result<Tensor> {
    using T = decltype(zero);
    ATOLL_ASSIGN_OR_RETURN(const T s, ConvertScalar<T>(rhs));
    Tensor out(lhs.dtype(), lhs.shape());
    const T* a = lhs.as<T>().data();
    ATOLL_RETURN_IF_ERROR(Compute<T>(
        op, lhs.num_elements(), [a](int64_t i) { return a[i]; }, [s](int64_t) { return s; },
        out.as<T>().data()));
    return out;
  });
}

Result<Tensor> Binary(BinaryOp op, double lhs, const Tensor& rhs) {
  ATOLL_RETURN_IF_ERROR(CheckWellFormed(rhs, "right operand"));
  return ForDType(rhs.dtype(), [&](auto zero) -> Result<Tensor> {
    using T = decltype(zero);
    ATOLL_ASSIGN_OR_RETURN(const T s, ConvertScalar<T>(lhs));
    Tensor out(rhs.dtype(), rhs.shape());
    const T* b = rhs.as<T>().data();
    ATOLL_RETURN_IF_ERROR(Compute<T>(
        op, rhs.num_elements(), [s](int64_t) { return s; }, [b](int64_t i) { return b[i]; },
        out.as<T>().data()));
    return out;
  });
}

Result<Tensor> Filter(const Tensor& input, double threshold) {
  ATOLL_RETURN_IF_ERROR(CheckWellFormed(input, "filter operand"));
  if (input.shape().size() != 1) {
    return InvalidArgument(fmt::format("filter takes a 1-D tensor, got {}", Describe(input)));
  }
  return ForDType(input.dtype(), [&](auto zero) -> Result<Tensor> {
    using T = decltype(zero);
    std::vector<T> kept;
    for (T v : input.as<T>()) {
      if (static_cast<double>(v) > threshold) kept.push_back(v);
    }
    Tensor out(input.dtype(), {static_cast<int64_t>(kept.size())});
    std::copy(kept.begin(), kept.end(), out.as<T>().begin());
    return out;
  });
}

Result<Tensor> Spin(Tensor input, double microseconds) {
  if (!(microseconds >= 0 && microseconds <= kMaxSpinMicros)) {
    return InvalidArgument(
        fmt::format("spin time must be in [0, {}] us, got {}", kMaxSpinMicros, microseconds));
  }
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::ceil<Clock::duration>(
                                           std::chrono::duration<double, std::micro>(microseconds));
  while (Clock::now() < deadline) {
    // Busy: the device is occupied.
  }
  return input;
}

}  // namespace atl::kernels
