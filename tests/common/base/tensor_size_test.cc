// Element counts and byte sizes of shapes: CheckedMul, CheckedNumElements, CheckedNumBytes and
// what is built on them. A shape whose count or size would wrap around is refused naming it.
#include <cstdint>
#include <limits>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "atoll/tensor.h"
#include "common/base/checked_math.h"
#include "common/base/tensor_block.h"

namespace atl {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kBig = int64_t{1} << 32;

TEST(CheckedMulTest, GivesTheProductOrNothing) {
  EXPECT_EQ(CheckedMul<int64_t>(6, 7), 42);
  EXPECT_EQ(CheckedMul<int64_t>(kMax, 1), kMax);
  EXPECT_EQ(CheckedMul<int64_t>(kMax, 0), 0);
  EXPECT_EQ(CheckedMul<int64_t>(kBig, kBig), std::nullopt);
  EXPECT_EQ(CheckedMul<int64_t>(kMax / 2 + 1, 2), std::nullopt);
  EXPECT_EQ(CheckedMul<uint64_t>(uint64_t{1} << 63, 2), std::nullopt);
  EXPECT_EQ(CheckedMul<uint32_t>(65536, 65536), std::nullopt);
}

TEST(CheckedNumElementsTest, CountsValidShapes) {
  EXPECT_EQ(*CheckedNumElements({}), 1);
  EXPECT_EQ(*CheckedNumElements({2, 3, 4}), 24);
  EXPECT_EQ(*CheckedNumElements({0, kBig, kBig}), 0);
  EXPECT_EQ(*CheckedNumElements({kMax}), kMax);
  EXPECT_EQ(*CheckedNumBytes(DType::kI32, {2, 3}), 24u);
  EXPECT_EQ(*CheckedNumBytes(DType::kF32, {kMax / 4}), static_cast<uint64_t>(kMax / 4 * 4));
}

TEST(CheckedNumElementsTest, RefusesNegativeAndOverflowingShapesNamingThem) {
  auto negative = CheckedNumElements({2, -3});
  EXPECT_EQ(negative.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(negative.status().message(), "shape [2,-3] has a negative dimension");
  auto dynamic = CheckedNumElements({kDynamicDim, 4});
  EXPECT_EQ(dynamic.status().message(), "shape [?,4] has a negative dimension");
  // 2^32 * 2^32 = 2^64: wraps to 0 in uint64 arithmetic.
  auto elements = CheckedNumElements({kBig, kBig});
  EXPECT_EQ(elements.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(elements.status().message(),
            "shape [4294967296,4294967296] has more elements than an int64 can count");
  // 2^62 elements count, but their 2^64 bytes do not.
  auto bytes = CheckedNumBytes(DType::kF32, {kBig, kBig / 4});
  EXPECT_EQ(bytes.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(bytes.status().message(),
            "f32[4294967296,1073741824] takes more bytes than an int64 can count");
  const auto past_the_table = static_cast<DType>(kNumDTypes);
  EXPECT_THAT(CheckedNumBytes(past_the_table, {2}).status().message(),
              HasSubstr("unknown dtype code " + std::to_string(kNumDTypes)));
}

TEST(CheckedNumElementsTest, NumElementsIsMinusOneWhereTheCheckedCountFails) {
  EXPECT_EQ(NumElements({2, 3}), 6);
  EXPECT_EQ(NumElements({kBig, kBig}), -1);
  EXPECT_EQ(NumElements({kDynamicDim, kDynamicDim}), -1) << "not (-1) * (-1) = 1";
}

TEST(TensorSizeTest, BytesForAShapeThatWrapsAreRefused) {
  // 2^64 f32 elements would need 0 bytes in wrapped uint64 arithmetic.
  auto t = Tensor::FromBytes(DType::kF32, {kBig, kBig}, {});
  EXPECT_EQ(t.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("[4294967296,4294967296]"));
  auto quarter = Tensor::FromBytes(DType::kF32, {kBig, kBig / 4}, {});
  EXPECT_EQ(quarter.status().code(), Code::kInvalidArgument);
}

TEST(TensorSizeTest, AnUncountableShapeMakesATensorWithoutBytes) {
  Tensor t(DType::kF32, {kBig, kBig});
  EXPECT_EQ(t.nbytes(), 0u);
  EXPECT_EQ(t.num_elements(), -1);
}

TEST(TensorSizeTest, ABlockWhoseEndWouldWrapDoesNotLieInside) {
  Tensor dst(DType::kF32, {4});
  const Status s = InsertBlock(dst, Tensor::F32({2}, {1, 2}), {kMax - 1});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("does not lie inside [4]"));
  EXPECT_EQ(ExtractBlock(dst, {kMax}, {2}).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace atl
