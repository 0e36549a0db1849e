// kernels::Matmul against a triple loop in double, over odd sizes and every transpose.
#include "kernels/matmul.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/kernels/kernel_checks.h"
#include "tests/kernels/reference_ops.h"
#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

using testutil::ExpectClose;
using testutil::ExpectInvalid;
using testutil::RandomF32;

TEST(MatmulKernelTest, MatchesReferenceForEveryTransposeAndOddSizes) {
  std::mt19937 rng(11);
  const int64_t sizes[] = {1, 7, 13, 33};
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (int64_t m : sizes) {
        for (int64_t k : sizes) {
          for (int64_t n : {int64_t{1}, int64_t{13}, int64_t{33}}) {
            const Shape a_shape = ta ? Shape{k, m} : Shape{m, k};
            const Shape b_shape = tb ? Shape{n, k} : Shape{k, n};
            const Tensor a = RandomF32(rng, a_shape);
            const Tensor b = RandomF32(rng, b_shape);
            ATOLL_ASSERT_OK_AND_ASSIGN(Tensor c,
                                       Matmul(a, b, {.transpose_a = ta, .transpose_b = tb}));
            const std::vector<double> ref = testutil::RefMatmul(
                a.ToDoubles(), a_shape[1], ta, b.ToDoubles(), b_shape[1], tb, m, k, n);
            SCOPED_TRACE(testing::Message()
                         << "ta=" << ta << " tb=" << tb << " m=" << m << " k=" << k << " n=" << n);
            ExpectClose(c, {m, n}, ref, 1e-4, 1e-5);
          }
        }
      }
    }
  }
}

TEST(MatmulKernelTest, EmptyDimensionsGiveZeros) {
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor c,
                             Matmul(Tensor(DType::kF32, {3, 0}), Tensor(DType::kF32, {0, 2}), {}));
  EXPECT_EQ(c, Tensor(DType::kF32, {3, 2}));
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor d, Matmul(Tensor(DType::kF32, {0, 4}),
                                              Tensor(DType::kF32, {5, 4}), {.transpose_b = true}));
  EXPECT_EQ(d.shape(), (Shape{0, 5}));
}

TEST(MatmulKernelTest, RejectsBadShapesAndDTypes) {
  const Tensor a(DType::kF32, {2, 3});
  ExpectInvalid(Matmul(a, Tensor(DType::kF32, {2, 4}), {}),
                {"inner dimensions 3 and 2", "f32[2,4]"});
  ExpectInvalid(Matmul(a, Tensor(DType::kF32, {4, 2}), {.transpose_b = true}),
                {"a x b^T", "3 and 2"});
  ExpectInvalid(Matmul(a, Tensor(DType::kF32, {3}), {}), {"two matrices", "f32[3]"});
  ExpectInvalid(Matmul(a, Tensor(DType::kI32, {3, 2}), {}), {"must be f32", "i32[3,2]"});
  ExpectInvalid(Matmul(Tensor(), a, {}), {"malformed"});
}

}  // namespace
}  // namespace atl::kernels
