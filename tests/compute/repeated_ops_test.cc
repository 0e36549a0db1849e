// MergeRepeatedOps (compute/repeated_ops.h): which ops merge, and that the merged function
// gives the original's outputs bit for bit (the oracle: the original run op by op).
#include "compute/repeated_ops.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "compute/interpreter.h"
#include "tests/status_matchers.h"

namespace atl::compute {
namespace {

using ir::OpCode;
using ir::Operand;

Operand RepIn(int32_t i) { return {Operand::kInput, i, 0.0}; }
Operand RepAt(int32_t i) { return {Operand::kOp, i, 0.0}; }
Operand RepScalar(double v) { return {Operand::kScalar, 0, v}; }

const ir::TensorType kRepT{DType::kF32, {4, 3}, {-1, -1}};

TEST(RepeatedOpsTest, RepeatsMergeScalarsBitForBitAndOutputsFollow) {
  ir::FunctionDef fn{"f", {kRepT}, {}, {}, {}, {}};
  fn.ops = {{OpCode::kExp, {RepIn(0)}, 0, kRepT},
            {OpCode::kMul, {RepIn(0), RepScalar(0.0)}, 0, kRepT},
            {OpCode::kExp, {RepIn(0)}, 0, kRepT},                   // repeats 0
            {OpCode::kMul, {RepIn(0), RepScalar(-0.0)}, 0, kRepT},  // not 1: -0.0 is another scalar
            {OpCode::kAdd, {RepAt(2), RepAt(1)}, 0, kRepT},         // reads 0 once 2 is merged
            {OpCode::kAdd, {RepAt(0), RepAt(1)}, 0, kRepT}};        // then repeats 4
  fn.outputs = {RepAt(5), RepAt(3), RepAt(2)};
  ASSERT_THAT(ir::Validate(fn, 1), IsOk());
  const ir::FunctionDef merged = MergeRepeatedOps(fn);
  ASSERT_THAT(ir::Validate(merged, 1), IsOk());
  ASSERT_EQ(merged.ops.size(), 4u);
  EXPECT_EQ(merged.ops[2].operands[1].scalar, 0.0);
  EXPECT_TRUE(std::signbit(merged.ops[2].operands[1].scalar));
  EXPECT_EQ(merged.ops[3].operands, (std::vector<Operand>{RepAt(0), RepAt(1)}));
  EXPECT_EQ(merged.outputs, (std::vector<Operand>{RepAt(3), RepAt(2), RepAt(0)}));

  Tensor x(DType::kF32, kRepT.shape);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-3, 3);
  for (float& v : x.as<float>()) v = dist(rng);
  x.as<float>()[0] = -1.0f;  // x * -0.0 is +0.0 here, x * 0.0 is -0.0
  const auto want = RunFunction(fn, 0, 1, {x});
  const auto got = RunFunction(merged, 0, 1, {x});
  ASSERT_THAT(want, IsOk());
  ASSERT_THAT(got, IsOk());
  ASSERT_EQ(want->size(), got->size());
  for (size_t k = 0; k < want->size(); ++k) {
    ASSERT_EQ((*want)[k].nbytes(), (*got)[k].nbytes());
    EXPECT_EQ(std::memcmp((*want)[k].data(), (*got)[k].data(), (*want)[k].nbytes()), 0)
        << "output " << k;
  }
}

TEST(RepeatedOpsTest, ACollectiveFunctionAndSpinsStayAsTheyAre) {
  ir::FunctionDef fn{"f", {kRepT}, {}, {}, {}, {}};
  fn.ops = {{OpCode::kSpin, {RepIn(0)}, 10, kRepT},
            {OpCode::kSpin, {RepIn(0)}, 10, kRepT},
            {OpCode::kExp, {RepIn(0)}, 0, kRepT},
            {OpCode::kExp, {RepIn(0)}, 0, kRepT}};
  fn.outputs = {RepAt(1), RepAt(3)};
  const ir::FunctionDef merged = MergeRepeatedOps(fn);
  ASSERT_EQ(merged.ops.size(), 3u);  // both spins, one exp
  EXPECT_EQ(merged.ops[0].code, OpCode::kSpin);
  EXPECT_EQ(merged.ops[1].code, OpCode::kSpin);
  EXPECT_EQ(merged.outputs, (std::vector<Operand>{RepAt(1), RepAt(2)}));
  ir::FunctionDef with_collective = fn;
  with_collective.ops.push_back({OpCode::kAllReduceSum, {RepAt(3)}, 0, kRepT});
  EXPECT_EQ(MergeRepeatedOps(with_collective), with_collective);
}

}  // namespace
}  // namespace atl::compute
