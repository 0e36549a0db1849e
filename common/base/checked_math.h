// Size arithmetic that reports overflow instead of wrapping. Every element count and byte
// size computed from a shape goes through CheckedMul, since a shape may come from a user, a
// job file or the wire, and a product that wraps would size a buffer too small for its data.
#pragma once

#include <optional>
#include <type_traits>

namespace atl {

// a * b, or nullopt when the exact product does not fit in T.
template <typename T>
std::optional<T> CheckedMul(T a, T b) {
  static_assert(std::is_integral_v<T>);
  T product;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

}  // namespace atl
