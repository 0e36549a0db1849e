// Reductions of one contiguous row (a reduction over the last axis: softmax's max and sum,
// layer norm's mean), kept in kRowLanes independent accumulators that the compiler holds in
// vector registers: one accumulator is a chain of dependent adds, a few cycles per element.
// Internal to the kernel library.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

namespace atl::kernels::internal {

inline constexpr int64_t kRowLanes = 8;

// The sum of row[0, len) in double (as the kernels sum: a long row keeps its precision).
template <typename T>
double RowSum(const T* row, int64_t len) {
  double acc[kRowLanes] = {};
  int64_t i = 0;
  for (; i + kRowLanes <= len; i += kRowLanes) {
    for (int64_t j = 0; j < kRowLanes; ++j) acc[j] += static_cast<double>(row[i + j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < kRowLanes; ++j) sum += acc[j];
  for (; i < len; ++i) sum += static_cast<double>(row[i]);
  return sum;
}

// The larger (kMax) or smaller of a and v, NaN when either is (jax.lax's max and min).
template <bool kMax, typename T>
T Extreme(T a, T v) {
  const bool take = kMax ? v > a : v < a;
  if constexpr (std::is_floating_point_v<T>) {
    return (take || v != v) ? v : a;  // a NaN `a` stays: neither test holds
  } else {
    return take ? v : a;
  }
}

// The largest (kMax) or smallest value of row[0, len), NaN when one is; for an empty row,
// the identity (-inf / +inf, or the integer type's lowest / highest).
template <bool kMax, typename T>
T RowExtreme(const T* row, int64_t len) {
  T identity;
  if constexpr (std::is_floating_point_v<T>) {
    identity = kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  } else {
    identity = kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
  T acc[kRowLanes];
  for (int64_t j = 0; j < kRowLanes; ++j) acc[j] = identity;
  int64_t i = 0;
  for (; i + kRowLanes <= len; i += kRowLanes) {
    for (int64_t j = 0; j < kRowLanes; ++j) acc[j] = Extreme<kMax>(acc[j], row[i + j]);
  }
  T out = identity;
  for (int64_t j = 0; j < kRowLanes; ++j) out = Extreme<kMax>(out, acc[j]);
  for (; i < len; ++i) out = Extreme<kMax>(out, row[i]);
  return out;
}

template <typename T>
T RowMax(const T* row, int64_t len) {
  return RowExtreme<true>(row, len);
}

}  // namespace atl::kernels::internal
