// The per-element loop of every binary kernel: elementwise.cc's f32 and f64 broadcast and f32
// fused steps and arithmetic.cc's f32, f64, i32 and i64 tensors and scalars. Internal to the kernel
// library; a header so that the operand readers inline into the loops, one loop per BinaryFn so
// that the compiler vectorizes each.
#pragma once

#include <concepts>
#include <cstdint>
#include <type_traits>

#include "kernels/elementwise.h"

namespace atl::kernels::internal {

// The arithmetic of one element. float and double follow IEEE 754. The integers (int32_t,
// int64_t) wrap around instead of overflowing (computed unsigned, whose conversion back is
// modular in C++20); their division truncates toward zero, needs b != 0 (the caller
// checks), and wraps MIN / -1, which overflows (and traps on x86), to MIN as negation does.
template <std::floating_point T>
T Add(T a, T b) {
  return a + b;
}
template <std::floating_point T>
T Sub(T a, T b) {
  return a - b;
}
template <std::floating_point T>
T Mul(T a, T b) {
  return a * b;
}
template <std::floating_point T>
T Div(T a, T b) {
  return a / b;
}
template <std::signed_integral T>
T Add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <std::signed_integral T>
T Sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <std::signed_integral T>
T Mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}
template <std::signed_integral T>
T Div(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return b == -1 ? static_cast<T>(U{0} - static_cast<U>(a)) : a / b;
}

// The unsigned integers (u8, u32, and bool as 0 or 1) add modulo their width; bool's sum is
// its or.
template <std::unsigned_integral T>
T Add(T a, T b) {
  return static_cast<T>(a + b);
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
