// Comparing trained tensors against a reference, for the example tests.
#pragma once

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "atoll/tensor.h"

namespace atl::testing {

// The largest |a - b| / (1 + |b|) over the elements of two f32 tensors of one shape.
inline double RelativeDifference(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double worst = 0;
  for (int64_t i = 0; i < a.num_elements() && i < b.num_elements(); ++i) {
    const double x = a.as<float>()[i];
    const double y = b.as<float>()[i];
    worst = std::max(worst, std::abs(x - y) / (1 + std::abs(y)));
  }
  return worst;
}

}  // namespace atl::testing
