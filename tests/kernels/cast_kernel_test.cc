// kernels::Cast between every pair of dtypes: values that every dtype holds survive every
// cast; floating results round once, to nearest even; integers refuse what has no value.
#include "kernels/cast.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/kernels/kernel_checks.h"
#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

using testutil::ExpectInvalid;

std::vector<DType> AllDTypes() {
  std::vector<DType> all;
  for (size_t code = 0; code < kNumDTypes; ++code) all.push_back(static_cast<DType>(code));
  return all;
}

TEST(CastKernelTest, ValuesEveryDTypeHoldsSurviveEveryCast) {
  // Small whole numbers and halves that bf16's 8 significant bits hold; the integer dtypes
  // take them truncated toward zero, as a cast into them does.
  // Each pair takes those of them that both dtypes hold (bool: 0 and 1; u8: no negatives).
  const std::vector<double> values = {0, 1, -2, 3.5, -0.5, 100, -128, 255};
  const auto holds = [](DType dtype, double v) {
    return Tensor::FromDoubles(dtype, {}, {IsFloating(dtype) ? v : std::trunc(v)}).ok();
  };
  for (DType from : AllDTypes()) {
    for (DType to : AllDTypes()) {
      SCOPED_TRACE(fmt::format("{} -> {}", DTypeName(from), DTypeName(to)));
      std::vector<double> held;
      for (double v : values) {
        if (holds(from, v) && holds(to, v)) held.push_back(IsFloating(from) ? v : std::trunc(v));
      }
      ATOLL_ASSERT_OK_AND_ASSIGN(
          const Tensor x, Tensor::FromDoubles(from, {static_cast<int64_t>(held.size())}, held));
      ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor y, Cast(x, to));
      EXPECT_EQ(y.dtype(), to);
      EXPECT_EQ(y.shape(), x.shape());
      std::vector<double> want = x.ToDoubles();
      if (!IsFloating(to)) {
        for (double& v : want) v = std::trunc(v);
      }
      EXPECT_EQ(y.ToDoubles(), want);
    }
  }
}

// 1 + 2^-8 + 2^-30 is just above the midpoint between bf16's 1 and 1 + 2^-7: it rounds up.
// Rounded to f32 first, it would become the midpoint itself (f32 keeps 23 bits), which ties
// to even, down to 1: one rounding is not two.
TEST(CastKernelTest, F64AndIntegersRoundOnceIntoBF16AndF16) {
  const double above_bf16_tie = 1 + std::ldexp(1, -8) + std::ldexp(1, -30);
  const double above_f16_tie = 1 + std::ldexp(1, -11) + std::ldexp(1, -40);
  const Tensor x = Tensor::F64({2}, {above_bf16_tie, above_f16_tie});
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor b, Cast(x, DType::kBF16));
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor h, Cast(x, DType::kF16));
  EXPECT_EQ(b.ToDoubles()[0], 1 + std::ldexp(1, -7));
  EXPECT_EQ(h.ToDoubles()[1], 1 + std::ldexp(1, -10));
  // Through f32 the same values would have tied and rounded down.
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor f, Cast(x, DType::kF32));
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor bf, Cast(f, DType::kBF16));
  EXPECT_EQ(bf.ToDoubles()[0], 1.0);
  // An integer past 2^24 (f32's last exact one) alike: 2^25 + 2^17 + 1 is above bf16's tie.
  const int64_t big = (int64_t{1} << 25) + (int64_t{1} << 17) + 1;
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor ib, Cast(Tensor::I64({1}, {big}), DType::kBF16));
  EXPECT_EQ(ib.ToDoubles()[0], std::ldexp(1, 25) + std::ldexp(1, 18));
  // And the largest values overflow to infinity only past the format's rounding edge.
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor edge,
                             Cast(Tensor::F64({3}, {65519.9, 65520, 1e300}), DType::kF16));
  EXPECT_EQ(edge.ToDoubles(), (std::vector<double>{65504, INFINITY, INFINITY}));
}

TEST(CastKernelTest, FloatsIntoIntegersTruncateTowardZero) {
  const Tensor x = Tensor::F32({4}, {2.9f, -2.9f, -0.4f, 1e9f});
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor y, Cast(x, DType::kI32));
  EXPECT_EQ(y.ToDoubles(), (std::vector<double>{2, -2, 0, 1e9}));
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor z, Cast(Tensor::F64({1}, {-9.2e18}), DType::kI64));
  EXPECT_EQ(z.as<int64_t>()[0], static_cast<int64_t>(-9.2e18));
}

TEST(CastKernelTest, ValuesWithoutAnIntegerValueAreRefusedByPosition) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  ExpectInvalid(Cast(Tensor::F32({3}, {1, nan, 2}), DType::kI32), {"element 1", "i32"});
  ExpectInvalid(Cast(Tensor::F32({2}, {1, INFINITY}), DType::kI64), {"element 1", "i64"});
  ExpectInvalid(Cast(Tensor::F64({1}, {2147483648.0}), DType::kI32), {"element 0"});
  ExpectInvalid(Cast(Tensor::F64({1}, {9.3e18}), DType::kI64), {"element 0"});
  ExpectInvalid(Cast(Tensor::I64({2}, {0, int64_t{1} << 40}), DType::kI32), {"element 1"});
  // The edges that do fit.
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor edge,
                             Cast(Tensor::F64({2}, {2147483647.9, -2147483648.9}), DType::kI32));
  EXPECT_EQ(edge.ToDoubles(), (std::vector<double>{2147483647, -2147483648}));
}

TEST(CastKernelTest, RefusesAnUnknownDTypeAndTakesAnEmptyTensor) {
  ExpectInvalid(Cast(Tensor::F32({2}, {1, 2}), static_cast<DType>(kNumDTypes)), {"unknown dtype"});
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor empty, Cast(Tensor(DType::kBF16, {0, 3}), DType::kF64));
  EXPECT_EQ(empty.shape(), (Shape{0, 3}));
}

}  // namespace
}  // namespace atl::kernels
