// Double-precision references for the elementwise kernels (kernels::UnaryFn, one per row of
// atoll/unary_ops.def, and kernels::BinaryFn), shared by the kernel tests and the
// table-driven tests of the compute layer. A new row does not compile here (-Wswitch) until
// it has its reference.
#pragma once

#include <algorithm>
#include <cmath>

#include "kernels/elementwise.h"

namespace atl::testutil {

inline double RefUnary(kernels::UnaryFn fn, double x) {
  using kernels::UnaryFn;
  switch (fn) {
    case UnaryFn::kExp:
      return std::exp(x);
    case UnaryFn::kLog:
      return std::log(x);
    case UnaryFn::kTanh:
      return std::tanh(x);
    case UnaryFn::kRelu:
      return x < 0 ? 0 : x;
    case UnaryFn::kNeg:
      return -x;
    case UnaryFn::kSqrt:
      return std::sqrt(x);
    case UnaryFn::kRsqrt:
      return 1 / std::sqrt(x);
    case UnaryFn::kGelu:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case UnaryFn::kSigmoid:
      return 1 / (1 + std::exp(-x));
  }
  return NAN;
}

inline double RefBinary(kernels::BinaryFn fn, double a, double b) {
  using kernels::BinaryFn;
  switch (fn) {
    case BinaryFn::kAdd:
      return a + b;
    case BinaryFn::kSub:
      return a - b;
    case BinaryFn::kMul:
      return a * b;
    case BinaryFn::kDiv:
      return a / b;
    case BinaryFn::kMax:
      return std::max(a, b);
    case BinaryFn::kMin:
      return std::min(a, b);
  }
  return NAN;
}

// Where a test draws `fn`'s random inputs: (0.01, 9) for the ops defined on positive
// numbers only, (-4, 4) for the rest.
struct UnaryDomain {
  float lo;
  float hi;
};
inline UnaryDomain DomainOf(kernels::UnaryFn fn) {
  using kernels::UnaryFn;
  const bool positive = fn == UnaryFn::kLog || fn == UnaryFn::kSqrt || fn == UnaryFn::kRsqrt;
  return positive ? UnaryDomain{0.01f, 9.0f} : UnaryDomain{-4.0f, 4.0f};
}

}  // namespace atl::testutil
