// The collectives' type rules (common/ir/type_rules_collectives.cc) and what ir::Validate
// checks of them once the slice's mesh is known: axes that exist, sizes that divide over
// them, roots and pairs that name members.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <msgpack.hpp>

#include "common/ir/ir.h"
#include "tests/status_matchers.h"

namespace atl::ir {
namespace {

TensorType Cut(Shape shape, std::vector<int32_t> split, DType dtype = DType::kF32) {
  return {dtype, std::move(shape), std::move(split)};
}

// A function of one input `in` and one collective op on it.
FunctionDef OneOp(OpCode code, const TensorType& in, double axis,
                  std::vector<int64_t> params = {}) {
  FunctionDef fn;
  fn.name = std::string(OpName(code));
  fn.inputs = {in};
  fn.ops = {Op{code, {Operand{Operand::kInput, 0, 0.0}}, axis, {}, std::move(params)}};
  fn.outputs = {Operand{Operand::kOp, 0, 0.0}};
  return fn;
}

Result<TensorType> Infer(const FunctionDef& fn) { return InferType(fn, fn.ops[0]); }

// The function with its op typed, ready for Validate.
FunctionDef Typed(FunctionDef fn) {
  const Result<TensorType> type = Infer(fn);
  EXPECT_THAT(type, IsOk()) << fn.name << ": " << type.status().ToString();
  if (type.ok()) fn.ops[0].type = *type;
  return fn;
}

TEST(CollectiveTypeTest, EveryCollectiveRowIsACollective) {
  for (OpCode code : {OpCode::kAllReduceSum, OpCode::kAllReduceMax, OpCode::kAllReduceMin,
                      OpCode::kAllReduceMean, OpCode::kAllGather, OpCode::kReduceScatter,
                      OpCode::kAllToAll, OpCode::kBroadcast, OpCode::kCollectivePermute}) {
    EXPECT_TRUE(IsCollective(code)) << OpName(code);
  }
  EXPECT_FALSE(IsCollective(OpCode::kMatmul));
  EXPECT_FALSE(IsCollective(static_cast<OpCode>(kNumOpCodes)));
}

TEST(CollectiveTypeTest, EachCollectiveTypesItsResultOnOneAndTwoDimensionalMeshes) {
  struct Case {
    std::string what;
    FunctionDef fn;
    TensorType want;
  };
  const TensorType partial_rows = Cut({8, 6}, {0, -1});  // rows on axis 0, a partial along 1
  const std::vector<Case> cases = {
      {"whole-slice sum of a replicated partial",
       OneOp(OpCode::kAllReduceSum, Cut({4}, {-1}), kWholeSlice), Cut({4}, {-1})},
      {"sum over axis 1 of a tensor cut along axis 0",
       OneOp(OpCode::kAllReduceSum, partial_rows, 1), partial_rows},
      {"max over axis 0", OneOp(OpCode::kAllReduceMax, Cut({8}, {-1}), 0), Cut({8}, {-1})},
      {"min of i32", OneOp(OpCode::kAllReduceMin, Cut({8}, {-1}, DType::kI32), 0),
       Cut({8}, {-1}, DType::kI32)},
      {"mean over axis 1", OneOp(OpCode::kAllReduceMean, partial_rows, 1), partial_rows},
      {"gather the dimension cut along axis 1", OneOp(OpCode::kAllGather, Cut({8, 6}, {0, 1}), 1),
       Cut({8, 6}, {0, -1})},
      {"reduce-scatter a partial onto dimension 1 along axis 1",
       OneOp(OpCode::kReduceScatter, partial_rows, 1, {1}), Cut({8, 6}, {0, 1})},
      {"all-to-all from dimension 0 to dimension 1",
       OneOp(OpCode::kAllToAll, Cut({8, 6}, {0, -1}), 0, {1}), Cut({8, 6}, {-1, 0})},
      {"broadcast along axis 1", OneOp(OpCode::kBroadcast, partial_rows, 1, {1}), partial_rows},
      {"permute blocks cut along the axis",
       OneOp(OpCode::kCollectivePermute, Cut({8, 6}, {0, -1}), 0, {0, 1, 1, 2}),
       Cut({8, 6}, {0, -1})},
  };
  for (const Case& c : cases) {
    const Result<TensorType> got = Infer(c.fn);
    ASSERT_THAT(got, IsOk()) << c.what << ": " << got.status().ToString();
    EXPECT_EQ(*got, c.want) << c.what;
  }
}

TEST(CollectiveTypeTest, OtherOperandsAreRefusedSayingWhatIsAccepted) {
  struct Case {
    std::string what;
    FunctionDef fn;
    std::string mentions;
  };
  const std::vector<Case> cases = {
      {"a whole-slice sum of a cut tensor",
       OneOp(OpCode::kAllReduceSum, Cut({4}, {0}), kWholeSlice), "takes a replicated tensor"},
      {"a sum along the axis the tensor is cut along",
       OneOp(OpCode::kAllReduceSum, Cut({8, 6}, {0, -1}), 0), "not cut along it"},
      {"a mean of i32", OneOp(OpCode::kAllReduceMean, Cut({8}, {-1}, DType::kI32), 0),
       "takes f32, bf16, f16 or f64"},
      {"a negative axis", OneOp(OpCode::kAllGather, Cut({8}, {0}), -1), "whole number >= 0"},
      {"a fractional axis", OneOp(OpCode::kAllReduceMax, Cut({8}, {-1}), 0.5),
       "whole number >= 0 (or -1"},
      {"a gather of a tensor not cut along the axis",
       OneOp(OpCode::kAllGather, Cut({8, 6}, {0, -1}), 1), "needs a tensor cut along it"},
      {"a reduce-scatter without a dimension", OneOp(OpCode::kReduceScatter, Cut({8}, {-1}), 0),
       "params must be one dimension"},
      {"a reduce-scatter onto a dimension out of range",
       OneOp(OpCode::kReduceScatter, Cut({8}, {-1}), 0, {1}), "params must be one dimension"},
      {"a reduce-scatter onto a dimension cut already",
       OneOp(OpCode::kReduceScatter, Cut({8, 6}, {-1, 1}), 0, {1}), "is cut already"},
      {"an all-to-all of a tensor not cut along the axis",
       OneOp(OpCode::kAllToAll, Cut({8, 6}, {-1, -1}), 0, {1}), "needs a tensor cut along it"},
      {"an all-to-all onto the dimension it is cut on",
       OneOp(OpCode::kAllToAll, Cut({8, 6}, {0, -1}), 0, {0}), "is cut already"},
      {"a broadcast without a root", OneOp(OpCode::kBroadcast, Cut({8}, {-1}), 0),
       "the root's coordinate"},
      {"a broadcast of blocks cut along the axis", OneOp(OpCode::kBroadcast, Cut({8}, {0}), 0, {0}),
       "not cut along it"},
      {"a permute of no pairs", OneOp(OpCode::kCollectivePermute, Cut({8}, {0}), 0),
       "(source, target) pairs"},
      {"a permute with a target twice",
       OneOp(OpCode::kCollectivePermute, Cut({8}, {0}), 0, {0, 1, 2, 1}),
       "repeats a source or a target"},
      {"a permute of a negative member",
       OneOp(OpCode::kCollectivePermute, Cut({8}, {0}), 0, {0, -1}), "negative coordinate"},
      {"a collective of a dynamic shape", OneOp(OpCode::kAllGather, Cut({kDynamicDim}, {0}), 0),
       "static shape"},
  };
  for (const Case& c : cases) {
    const Result<TensorType> got = Infer(c.fn);
    ASSERT_FALSE(got.ok()) << c.what;
    EXPECT_EQ(got.status().code(), Code::kInvalidArgument) << c.what;
    EXPECT_NE(got.status().message().find(c.mentions), std::string::npos)
        << c.what << ": " << got.status().ToString();
  }
}

// Sizes that do not divide over the axis, axes the mesh lacks and members it lacks are
// refused when the function meets its slice (ir::Validate with the real mesh), naming them.
TEST(CollectiveTypeTest, UnevenSizesAndMissingAxesOrMembersAreRefusedOnTheSlicesMesh) {
  struct Case {
    std::string what;
    FunctionDef fn;
    Shape mesh;
    std::string mentions;  // empty: accepted
  };
  const TensorType six = Cut({6, 4}, {-1, -1});
  std::vector<Case> cases = {
      {"a reduce-scatter of 6 rows over 3 devices",
       OneOp(OpCode::kReduceScatter, six, 0, {0}),
       {3},
       ""},
      {"a reduce-scatter of 6 rows over 4 devices",
       OneOp(OpCode::kReduceScatter, six, 0, {0}),
       {4},
       "dimension 0 (6) does not divide over mesh axis 0 (4 devices)"},
      {"a reduce-scatter of 4 columns along axis 1 of a 2x3 mesh",
       OneOp(OpCode::kReduceScatter, six, 1, {1}),
       {2, 3},
       "dimension 1 (4) does not divide over mesh axis 1 (3 devices)"},
      {"an all-to-all onto 4 columns over 3 devices",
       OneOp(OpCode::kAllToAll, Cut({6, 4}, {0, -1}), 0, {1}),
       {3},
       "dimension 1 (4) does not divide over mesh axis 0 (3 devices)"},
      {"an all-to-all onto 4 columns over 2 devices",
       OneOp(OpCode::kAllToAll, Cut({6, 4}, {0, -1}), 0, {1}),
       {2},
       ""},
      {"a gather along axis 1 of a 1-D mesh",
       OneOp(OpCode::kAllGather, Cut({6, 4}, {-1, 1}), 1),
       {2},
       "mesh axis 1"},
      {"a sum along axis 2 of a 2-D mesh",
       OneOp(OpCode::kAllReduceSum, six, 2),
       {2, 2},
       "runs along mesh axis 2, but the mesh [2,2] has 2 axes"},
      {"a whole-slice sum on a 2-D mesh",
       OneOp(OpCode::kAllReduceSum, six, kWholeSlice),
       {2, 2},
       ""},
      {"a broadcast from member 2 of 2",
       OneOp(OpCode::kBroadcast, six, 0, {2}),
       {2},
       "root 2 is not a coordinate of mesh axis 0 (2 devices)"},
      {"a permute to member 3 of 3",
       OneOp(OpCode::kCollectivePermute, six, 0, {0, 3}),
       {3},
       "target 3 is not a coordinate"},
      {"a pipeline shift over 4 stages",
       OneOp(OpCode::kCollectivePermute, Cut({8, 4}, {0, -1}), 0, {0, 1, 1, 2, 2, 3}),
       {4},
       ""},
  };
  for (Case& c : cases) {
    FunctionDef fn = Typed(c.fn);
    fn.mesh = c.mesh;
    const Status s = Validate(fn, static_cast<int>(NumElements(c.mesh)));
    if (c.mentions.empty()) {
      EXPECT_THAT(s, IsOk()) << c.what << ": " << s.ToString();
      continue;
    }
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.what;
    EXPECT_NE(s.message().find(c.mentions), std::string::npos) << c.what << ": " << s.ToString();
    // Before the slice is known (the builder's check, over a mesh of ones with the axes the
    // input names) the same function passes.
    int32_t axes = 1;
    for (int32_t axis : fn.inputs[0].split) axes = std::max(axes, axis + 1);
    fn.mesh = Shape(axes, 1);
    EXPECT_THAT(Validate(fn, 1, /*slice_known=*/false), IsOk()) << c.what;
  }
}

TEST(CollectiveTypeTest, ParamsTravelWithTheOp) {
  const FunctionDef fn = Typed(OneOp(OpCode::kCollectivePermute, Cut({8}, {0}), 0, {0, 1, 1, 0}));
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, fn);
  FunctionDef back;
  msgpack::unpack(buffer.data(), buffer.size()).get().convert(back);
  EXPECT_EQ(back, fn);
  EXPECT_EQ(back.ops[0].params, (std::vector<int64_t>{0, 1, 1, 0}));
}

}  // namespace
}  // namespace atl::ir
