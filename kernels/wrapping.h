// a + b and a * b as jax.lax computes them on one element: integers wrap around (computed
// unsigned, whose conversion back is modular in C++20), floats follow IEEE 754. Internal to
// the kernel library (the lax kernels' scatters, cumulative reductions and powers).
#pragma once

#include <type_traits>

namespace atl::kernels::internal {

template <typename T>
T WrappingAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <typename T>
T WrappingMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

}  // namespace atl::kernels::internal
