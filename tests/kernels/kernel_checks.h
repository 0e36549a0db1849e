// Comparisons shared by the tests of the kernel library (kernels/): closeness against a
// reference computed in double, the InvalidArgument of a bad call, and central finite
// differences for gradient checks.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::testutil {

// `got` is of `dtype` and `shape` and each element is within atol + rtol * |ref| of `ref`.
inline void ExpectClose(const Tensor& got, const Shape& shape, const std::vector<double>& ref,
                        double atol = 1e-5, double rtol = 1e-5, DType dtype = DType::kF32) {
  ASSERT_EQ(got.dtype(), dtype);
  ASSERT_EQ(got.shape(), shape);
  const std::vector<double> values = got.ToDoubles();
  ASSERT_EQ(values.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(ref[i])) {
      ASSERT_TRUE(std::isnan(values[i])) << "element " << i << " of " << ShapeString(shape);
      continue;
    }
    if (std::isinf(ref[i])) {
      ASSERT_EQ(values[i], ref[i]) << "element " << i << " of " << ShapeString(shape);
      continue;
    }
    ASSERT_NEAR(values[i], ref[i], atol + rtol * std::abs(ref[i]))
        << "element " << i << " of " << ShapeString(shape);
  }
}

// The call failed with InvalidArgument and its message contains every one of `needles`.
template <typename T>
void ExpectInvalid(const Result<T>& result, std::vector<std::string_view> needles) {
  ASSERT_FALSE(result.ok()) << "expected InvalidArgument containing '"
                            << (needles.empty() ? "" : needles[0]) << "'";
  EXPECT_EQ(result.status().code(), Code::kInvalidArgument) << result.status().ToString();
  for (std::string_view needle : needles) {
    EXPECT_NE(result.status().message().find(needle), std::string::npos)
        << "'" << needle << "' not in: " << result.status().message();
  }
}

inline std::vector<double> Doubles(const Tensor& t) { return t.ToDoubles(); }

// d f / d x[i] by central differences of step h, f evaluated in double.
inline std::vector<double> NumericGrad(const std::function<double(const std::vector<double>&)>& f,
                                       std::vector<double> x, double h = 1e-5) {
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = f(x);
    x[i] = saved - h;
    const double down = f(x);
    x[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

// An f32 tensor holding `values` rounded to float.
inline Tensor F32From(const Shape& shape, const std::vector<double>& values) {
  std::vector<float> f(values.begin(), values.end());
  return Tensor::F32(shape, std::move(f));
}

}  // namespace atl::testutil
