// Cutting blocks out of tensors and writing them back, against index arithmetic.
#include "common/base/tensor_block.h"

#include <gtest/gtest.h>
#include "tests/status_matchers.h"

namespace atl {
namespace {

// f32 [2,3,4] holding 0..23.
Tensor Iota() {
  std::vector<float> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return Tensor::F32({2, 3, 4}, v);
}

TEST(TensorBlockTest, ExtractTakesTheBlockAtItsOffset) {
  auto block = ExtractBlock(Iota(), {1, 1, 2}, {1, 2, 2});
  ASSERT_THAT(block, IsOk());
  // Element (1, r, c) is 12 + 4r + c.
  EXPECT_EQ(*block, Tensor::F32({1, 2, 2}, {18, 19, 22, 23}));
  auto all = ExtractBlock(Iota(), {0, 0, 0}, {2, 3, 4});
  ASSERT_THAT(all, IsOk());
  EXPECT_EQ(*all, Iota());
  auto none = ExtractBlock(Iota(), {0, 0, 0}, {0, 3, 4});
  ASSERT_THAT(none, IsOk());
  EXPECT_EQ(none->num_elements(), 0);
}

TEST(TensorBlockTest, InsertWritesOnlyTheBlock) {
  Tensor t(DType::kF32, {2, 3});
  ASSERT_THAT(InsertBlock(t, Tensor::F32({2, 1}, {7, 8}), {0, 2}), IsOk());
  EXPECT_EQ(t, Tensor::F32({2, 3}, {0, 0, 7, 0, 0, 8}));
  Tensor scalar(DType::kI32, {});
  ASSERT_THAT(InsertBlock(scalar, Tensor::I32({}, {5}), {}), IsOk());
  EXPECT_EQ(scalar, Tensor::I32({}, {5}));
}

TEST(TensorBlockTest, BlocksOutsideTheTensorOrOfAnotherDtypeAreRefused) {
  EXPECT_EQ(ExtractBlock(Iota(), {1, 2, 0}, {1, 2, 4}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ExtractBlock(Iota(), {0, 0}, {1, 1}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ExtractBlock(Iota(), {-1, 0, 0}, {1, 1, 1}).status().code(), Code::kInvalidArgument);
  Tensor t(DType::kF32, {2, 2});
  EXPECT_EQ(InsertBlock(t, Tensor::I32({1, 1}, {1}), {0, 0}).code(), Code::kInvalidArgument);
  EXPECT_EQ(InsertBlock(t, Tensor::F32({1, 2}, {1, 2}), {0, 1}).code(), Code::kInvalidArgument);
}

// F32 and I32 of no values copied from a null pointer (undefined behaviour that UBSan in the
// fuzz build stopped at).
TEST(TensorTest, EmptyTensorsFromNoValues) {
  EXPECT_EQ(Tensor::F32({0, 2}, {}).nbytes(), 0u);
  EXPECT_EQ(Tensor::I32({0}, {}).nbytes(), 0u);
}

}  // namespace
}  // namespace atl
