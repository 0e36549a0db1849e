// kernels::Reduce (sum, max, mean over one axis) against index-by-index reference loops.
#include "kernels/reduce.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/kernels/kernel_checks.h"
#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

using testutil::ExpectClose;
using testutil::ExpectInvalid;
using testutil::RandomF32;

TEST(ReduceKernelTest, MatchesReferenceOverEveryAxis) {
  std::mt19937 rng(31);
  const std::vector<Shape> shapes = {{1},    {7},       {13, 33},    {2, 13, 3},
                                     {1, 1}, {4, 0, 3}, {3, 1, 7, 2}};
  for (ReduceFn fn : {ReduceFn::kSum, ReduceFn::kMax, ReduceFn::kMean}) {
    for (const Shape& shape : shapes) {
      const Tensor x = RandomF32(rng, shape);
      const std::vector<double> xv = x.ToDoubles();
      for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis) {
        int64_t outer = 1, inner = 1;
        for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
        for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
        const int64_t len = shape[axis];
        std::vector<double> ref(outer * inner);
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t i = 0; i < inner; ++i) {
            double acc = fn == ReduceFn::kMax ? -INFINITY : 0.0;
            for (int64_t r = 0; r < len; ++r) {
              const double v = xv[(o * len + r) * inner + i];
              acc = fn == ReduceFn::kMax ? std::max(acc, v) : acc + v;
            }
            if (fn == ReduceFn::kMean) acc = len == 0 ? NAN : acc / len;
            ref[o * inner + i] = acc;
          }
        }
        Shape out_shape = shape;
        out_shape.erase(out_shape.begin() + axis);
        SCOPED_TRACE(testing::Message()
                     << ReduceFnName(fn) << " " << ShapeString(shape) << " axis " << axis);
        ATOLL_ASSERT_OK_AND_ASSIGN(Tensor y, Reduce(fn, x, axis));
        ExpectClose(y, out_shape, ref, 1e-5, 1e-6);
        // The same axis counted from the end.
        ATOLL_ASSERT_OK_AND_ASSIGN(Tensor z,
                                   Reduce(fn, x, axis - static_cast<int64_t>(shape.size())));
        EXPECT_EQ(z, y);
      }
    }
  }
}

TEST(ReduceKernelTest, MaxPropagatesNanAndEmptyAxesHaveIdentities) {
  const Tensor x = Tensor::F32({2, 3}, {1, NAN, 2, 3, 4, 5});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor mx, ReduceMax(x, 1));
  ExpectClose(mx, {2}, {NAN, 5});
  const Tensor empty(DType::kF32, {2, 0});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor s, ReduceSum(empty, 1));
  ExpectClose(s, {2}, {0, 0});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor m, ReduceMax(empty, 1));
  ExpectClose(m, {2}, {-INFINITY, -INFINITY});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor mean, ReduceMean(empty, 1));
  ExpectClose(mean, {2}, {NAN, NAN});
}

// The last axis runs in vector lanes (kernels/row_reduce.h): rows shorter than, as long as
// and longer than the lanes, with a NaN in each lane position and in the tail.
TEST(ReduceKernelTest, LastAxisRowsInLanesMatchOneAccumulator) {
  std::mt19937 rng(7);
  for (int64_t len : {1, 5, 8, 9, 16, 64, 131}) {
    for (int64_t nan_at = -1; nan_at < std::min<int64_t>(len, 12); ++nan_at) {
      Tensor x = RandomF32(rng, {3, len});
      if (nan_at >= 0) x.as<float>()[len + nan_at] = NAN;  // row 1 only
      const std::vector<double> xv = x.ToDoubles();
      std::vector<double> sum(3, 0.0), mx(3, -INFINITY);
      for (int64_t o = 0; o < 3; ++o) {
        for (int64_t r = 0; r < len; ++r) {
          const double v = xv[o * len + r];
          sum[o] += v;
          mx[o] = (v != v || mx[o] != mx[o]) ? NAN : std::max(mx[o], v);
        }
      }
      SCOPED_TRACE(testing::Message() << "len " << len << " NaN at " << nan_at);
      ATOLL_ASSERT_OK_AND_ASSIGN(Tensor s, ReduceSum(x, 1));
      ExpectClose(s, {3}, sum, 1e-5, 1e-6);
      ATOLL_ASSERT_OK_AND_ASSIGN(Tensor m, ReduceMax(x, -1));
      ExpectClose(m, {3}, mx);
    }
  }
}

TEST(ReduceKernelTest, RejectsBadAxisRankAndDType) {
  ExpectInvalid(ReduceSum(Tensor(DType::kF32, {2, 3}), 2), {"reduce_sum", "axis 2", "rank 2"});
  ExpectInvalid(ReduceMax(Tensor(DType::kF32, {2, 3}), -3), {"axis -3"});
  ExpectInvalid(ReduceMean(Tensor(DType::kF32, {}), 0), {"rank >= 1", "f32[]"});
  ExpectInvalid(ReduceSum(Tensor(DType::kI32, {4}), 0), {"must be f32", "i32[4]"});
}

}  // namespace
}  // namespace atl::kernels
