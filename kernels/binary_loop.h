// The per-element loop of every binary kernel: elementwise.cc's f32 broadcast and fused
// steps and arithmetic.cc's f32 and i32 tensors and scalars. Internal to the kernel library;
// a header so that the operand readers inline into the loops, one loop per BinaryFn so that
// the compiler vectorizes each.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/elementwise.h"

namespace atl::kernels::internal {

// The arithmetic of one element. float follows IEEE 754. int32_t wraps around instead of
// overflowing (computed on uint32_t, whose conversion back to int32_t is modular in C++20);
// its division truncates toward zero, needs b != 0 (the caller checks), and wraps
// INT32_MIN / -1, which overflows (and traps on x86), to INT32_MIN as negation does.
inline float Add(float a, float b) { return a + b; }
inline float Sub(float a, float b) { return a - b; }
inline float Mul(float a, float b) { return a * b; }
inline float Div(float a, float b) { return a / b; }
inline int32_t Add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
inline int32_t Sub(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) - static_cast<uint32_t>(b));
}
inline int32_t Mul(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
}
inline int32_t Div(int32_t a, int32_t b) {
  return b == -1 ? static_cast<int32_t>(0u - static_cast<uint32_t>(a)) : a / b;
}

// True for a float NaN; integers have none.
template <typename T>
bool IsNan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return v != v;
  } else {
    return false;
  }
}

// out[i] = lhs(i) fn rhs(i) for i < n, where lhs and rhs read a tensor's element or return a
// scalar. max and min give NaN when either side is NaN. `fn` must be a known BinaryFn
// (an unknown one writes nothing).
template <typename T, typename Lhs, typename Rhs>
void BinaryLoop(BinaryFn fn, int64_t n, Lhs lhs, Rhs rhs, T* out) {
  switch (fn) {
    case BinaryFn::kAdd:
      for (int64_t i = 0; i < n; ++i) out[i] = Add(lhs(i), rhs(i));
      return;
    case BinaryFn::kSub:
      for (int64_t i = 0; i < n; ++i) out[i] = Sub(lhs(i), rhs(i));
      return;
    case BinaryFn::kMul:
      for (int64_t i = 0; i < n; ++i) out[i] = Mul(lhs(i), rhs(i));
      return;
    case BinaryFn::kDiv:
      for (int64_t i = 0; i < n; ++i) out[i] = Div(lhs(i), rhs(i));
      return;
    case BinaryFn::kMax:
      for (int64_t i = 0; i < n; ++i) {
        const T a = lhs(i);
        const T b = rhs(i);
        out[i] = (a > b || IsNan(a)) ? a : b;
      }
      return;
    case BinaryFn::kMin:
      for (int64_t i = 0; i < n; ++i) {
        const T a = lhs(i);
        const T b = rhs(i);
        out[i] = (a < b || IsNan(a)) ? a : b;
      }
      return;
  }
}

}  // namespace atl::kernels::internal
