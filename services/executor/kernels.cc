#include "services/executor/kernels.h"

#include <cblas.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

namespace atl::kernels {

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

std::string Describe(const Tensor& t) {
  return fmt::format("{}{}", DTypeName(t.dtype()), ShapeString(t.shape()));
}

// A tensor the kernels can index safely: a known dtype, no negative dimension, and exactly
// as many bytes as its dtype and shape need.
Status CheckWellFormed(const Tensor& t, std::string_view what) {
  if (t.dtype() != DType::kF32 && t.dtype() != DType::kI32) {
    return InvalidArgument(
        fmt::format("{} has unknown dtype {}", what, static_cast<int>(t.dtype())));
  }
  for (auto d : t.shape()) {
    if (d < 0)
      return InvalidArgument(
          fmt::format("{} has a negative dimension: {}", what, ShapeString(t.shape())));
  }
  const auto want = static_cast<size_t>(t.num_elements()) * DTypeSize(t.dtype());
  if (t.nbytes() != want) {
    return InvalidArgument(fmt::format("{} {} is malformed: it holds {} bytes, not {}", what,
                                       Describe(t), t.nbytes(), want));
  }
  return Status::Ok();
}

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

Result<Tensor> Matmul(const Tensor& lhs, const Tensor& rhs) {
  ATOLL_RETURN_IF_ERROR(CheckWellFormed(lhs, "matmul left operand"));
  ATOLL_RETURN_IF_ERROR(CheckWellFormed(rhs, "matmul right operand"));
  if (lhs.dtype() != DType::kF32 || rhs.dtype() != DType::kF32) {
    return InvalidArgument(
        fmt::format("matmul is f32 only, got {} x {}", Describe(lhs), Describe(rhs)));
  }
  if (lhs.shape().size() != 2 || rhs.shape().size() != 2 || lhs.shape()[1] != rhs.shape()[0]) {
    return InvalidArgument(
        fmt::format("matmul needs [m,k] x [k,n], got {} x {}", Describe(lhs), Describe(rhs)));
  }
  const int64_t m = lhs.shape()[0];
  const int64_t k = lhs.shape()[1];
  const int64_t n = rhs.shape()[1];
  constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();
  if (m > kMaxDim || k > kMaxDim || n > kMaxDim) {
    return InvalidArgument(
        fmt::format("matmul dimension above {}: {} x {}", kMaxDim, Describe(lhs), Describe(rhs)));
  }
  Tensor out(DType::kF32, {m, n});  // zero-filled: already the answer when m, k or n is 0
  if (m == 0 || k == 0 || n == 0) return out;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, lhs.as<float>().data(),
              static_cast<blasint>(k), rhs.as<float>().data(), static_cast<blasint>(n), 0.0f,
              out.as<float>().data(), static_cast<blasint>(n));
  return out;
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
