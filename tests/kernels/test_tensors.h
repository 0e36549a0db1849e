// Random tensors for kernel and interpreter tests; every generator takes its own engine so
// that each test is reproducible from its fixed seed.
#pragma once

#include <cstdint>
#include <random>

#include <gtest/gtest.h>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "tests/status_matchers.h"

namespace atl::testutil {

// Uniform in [lo, hi).
inline Tensor RandomF32(std::mt19937& rng, Shape shape, float lo = -4.0f, float hi = 4.0f) {
  Tensor t(DType::kF32, std::move(shape));
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.as<float>()) v = dist(rng);
  return t;
}

// Uniform in [lo, hi), drawn in double.
inline Tensor RandomF64(std::mt19937& rng, Shape shape, double lo = -4.0, double hi = 4.0) {
  Tensor t(DType::kF64, std::move(shape));
  std::uniform_real_distribution<double> dist(lo, hi);
  for (double& v : t.as<double>()) v = dist(rng);
  return t;
}

// Uniform in [lo, hi]; with `nonzero`, zeros are replaced by 1 (for divisors).
inline Tensor RandomI32(std::mt19937& rng, Shape shape, int32_t lo = -1000, int32_t hi = 1000,
                        bool nonzero = false) {
  Tensor t(DType::kI32, std::move(shape));
  std::uniform_int_distribution<int32_t> dist(lo, hi);
  for (int32_t& v : t.as<int32_t>()) {
    v = dist(rng);
    if (nonzero && v == 0) v = 1;
  }
  return t;
}

// f32 divisors away from zero: magnitude in [0.5, 4), either sign.
inline Tensor RandomF32Divisor(std::mt19937& rng, Shape shape) {
  Tensor t = RandomF32(rng, std::move(shape), 0.5f, 4.0f);
  std::bernoulli_distribution negative(0.5);
  for (float& v : t.as<float>()) {
    if (negative(rng)) v = -v;
  }
  return t;
}

}  // namespace atl::testutil

// Binds the value of a Result or fails the test with its Status.
#define ATOLL_ASSERT_OK_AND_ASSIGN(lhs, expr)                      \
  auto ATOLL_CONCAT(test_result_, __LINE__) = (expr);              \
  ASSERT_THAT(ATOLL_CONCAT(test_result_, __LINE__), IsOk())        \
      << ATOLL_CONCAT(test_result_, __LINE__).status().ToString(); \
  lhs = std::move(ATOLL_CONCAT(test_result_, __LINE__)).value()
