// kernels::TopK against a stable sort of each row (descending, ties by lower index).
#include "kernels/topk.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/kernels/kernel_checks.h"
#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

using testutil::ExpectInvalid;
using testutil::RandomF32;

// Checks TopK(x, k) against a stable descending sort of every row.
void CheckTopK(const Tensor& x, int64_t k) {
  ATOLL_ASSERT_OK_AND_ASSIGN(TopKResult r, TopK(x, k));
  const int64_t n = x.shape().back();
  Shape out_shape = x.shape();
  out_shape.back() = k;
  ASSERT_EQ(r.values.shape(), out_shape);
  ASSERT_EQ(r.indices.shape(), out_shape);
  ASSERT_EQ(r.indices.dtype(), DType::kI32);
  const auto xv = x.as<float>();
  const int64_t rows = n == 0 ? 0 : x.num_elements() / n;
  for (int64_t row = 0; row < rows; ++row) {
    std::vector<int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      const float va = xv[row * n + a], vb = xv[row * n + b];
      if (std::isnan(va) || std::isnan(vb)) return std::isnan(va) && !std::isnan(vb);
      return va > vb;
    });
    for (int64_t j = 0; j < k; ++j) {
      ASSERT_EQ(r.indices.as<int32_t>()[row * k + j], order[j]) << "row " << row << " rank " << j;
      const float want = xv[row * n + order[j]];
      const float got = r.values.as<float>()[row * k + j];
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got));
      } else {
        ASSERT_EQ(got, want);
      }
    }
  }
}

TEST(TopKKernelTest, TakesPositiveZeroBeforeNegativeZeroAsXlaDoes) {
  // XLA's top_k orders floats totally (-0 below +0); a stable sort would keep them in place.
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor x, Tensor::FromDoubles(DType::kF32, {4}, {-0.0, 0.0, 1, -0.0}));
  ATOLL_ASSERT_OK_AND_ASSIGN(TopKResult r, TopK(x, 3));
  EXPECT_EQ(r.indices.as<int32_t>()[0], 2);
  EXPECT_EQ(r.indices.as<int32_t>()[1], 1);
  EXPECT_EQ(r.indices.as<int32_t>()[2], 0);
  EXPECT_FALSE(std::signbit(r.values.as<float>()[1]));
  EXPECT_TRUE(std::signbit(r.values.as<float>()[2]));
}

TEST(TopKKernelTest, MatchesStableSortOnRandomRows) {
  std::mt19937 rng(71);
  for (const Shape& shape : std::vector<Shape>{{1}, {7}, {13, 33}, {3, 2, 13}, {4, 0}}) {
    const Tensor x = RandomF32(rng, shape);
    const int64_t n = shape.back();
    for (int64_t k : {int64_t{0}, int64_t{1}, n / 2, n}) {
      if (k > n) continue;
      SCOPED_TRACE(testing::Message() << ShapeString(shape) << " k=" << k);
      CheckTopK(x, k);
    }
  }
}

TEST(TopKKernelTest, TiesGoToTheLowerIndexAndNanRanksFirst) {
  std::mt19937 rng(72);
  Tensor x = RandomF32(rng, {7, 33}, 0.0f, 3.0f);
  for (float& v : x.as<float>()) v = std::floor(v);  // only 0, 1, 2: many ties
  CheckTopK(x, 5);
  CheckTopK(x, 33);
  // NaNs first by index, then by value; +0 before -0 (jax.lax.top_k gives 1 5 2 0 4 3).
  const Tensor y = Tensor::F32({6}, {1.0f, NAN, 2.0f, -0.0f, 0.0f, NAN});
  ATOLL_ASSERT_OK_AND_ASSIGN(TopKResult r, TopK(y, 6));
  EXPECT_EQ(r.indices, Tensor::I32({6}, {1, 5, 2, 0, 4, 3}));
}

// Each row's dy goes to the positions TopK chose, the rest stays zero.
TEST(TopKKernelTest, BackwardPutsEachValuesGradientAtItsPosition) {
  const Tensor x = Tensor::F32({2, 4}, {0.5f, 3, -1, 2, 7, 7, 1, 9});
  const Tensor dy = Tensor::F32({2, 2}, {10, 20, 30, 40});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor dx, TopKBackward(dy, x));
  EXPECT_EQ(dx, Tensor::F32({2, 4}, {0, 10, 0, 20, 40, 0, 0, 30}));
  ExpectInvalid(TopKBackward(Tensor(DType::kF32, {2, 5}), x), {"k = 5", "0 <= k <= 4"});
  ExpectInvalid(TopKBackward(Tensor(DType::kF32, {3, 2}), x), {"top-k backward dy", "f32[2,2]"});
}

TEST(TopKKernelTest, RejectsBadK) {
  ExpectInvalid(TopK(Tensor(DType::kF32, {2, 5}), 6), {"k = 6", "<= 5", "f32[2,5]"});
  ExpectInvalid(TopK(Tensor(DType::kF32, {2, 5}), -1), {"k = -1"});
  ExpectInvalid(TopK(Tensor(DType::kF32, {}), 0), {"rank >= 1"});
  ExpectInvalid(TopK(Tensor(DType::kI32, {5}), 1), {"must be f32"});
}

}  // namespace
}  // namespace atl::kernels
