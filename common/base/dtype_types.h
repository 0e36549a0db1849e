// The C++ type of each dtype's elements, and a generic call made with it, so that code over
// every dtype is one template rather than a switch per dtype. Internal; thread-safe.
#pragma once

#include <cstdint>

#include "atoll/tensor.h"
#include "common/base/half.h"

namespace atl {

// Calls f(T{}) with the element type T of `dtype`: float, int32_t, BF16, F16, double,
// int64_t, bool, int8_t, uint8_t or uint32_t. Does nothing for a code outside the table
// (callers check the dtype first).
template <typename F>
void VisitDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32:
      f(float{});
      return;
    case DType::kI32:
      f(int32_t{});
      return;
    case DType::kBF16:
      f(BF16{});
      return;
    case DType::kF16:
      f(F16{});
      return;
    case DType::kF64:
      f(double{});
      return;
    case DType::kI64:
      f(int64_t{});
      return;
    case DType::kBool:
      f(bool{});
      return;
    case DType::kI8:
      f(int8_t{});
      return;
    case DType::kU8:
      f(uint8_t{});
      return;
    case DType::kU32:
      f(uint32_t{});
      return;
  }
}

// An element as a double: exact but for an int64 beyond 2^53.
inline double ToDouble(BF16 v) { return Widen(v); }
inline double ToDouble(F16 v) { return Widen(v); }
template <typename T>
double ToDouble(T v) {
  return static_cast<double>(v);
}

}  // namespace atl
