// The jax.lax primitives' type rules: rows found by name, variadic operand counts, the
// shardings each keeps (a cut dimension that comes through whole, a partial sum over a cut
// contracting dimension) and the refusals that name the dimension and the mesh axis. Their
// values are checked against JAX in tests/python/test_lax.py.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/ir/ir.h"
#include "tests/status_matchers.h"

namespace atl::ir {
namespace {

// A function of `inputs` (a mesh of 2 along axis 0, 2 along axis 1) with one op.
Result<TensorType> TypeOf(std::vector<TensorType> inputs, std::string_view name,
                          std::vector<int64_t> params = {}, double attr = 0,
                          std::vector<int32_t> operand_inputs = {}) {
  FunctionDef fn{"f", std::move(inputs), {}, {}, {2, 2}, {}};
  if (operand_inputs.empty()) {
    for (size_t i = 0; i < fn.inputs.size(); ++i) operand_inputs.push_back(i);
  }
  std::vector<Operand> operands;
  for (int32_t i : operand_inputs) operands.push_back({Operand::kInput, i, 0.0});
  ATOLL_ASSIGN_OR_RETURN(const OpCode code, OpCodeNamed(name));
  return InferType(fn, Op(code, std::move(operands), attr, {}, std::move(params)));
}

TensorType T(DType dtype, Shape shape, std::vector<int32_t> split = {}) {
  if (split.empty()) split.assign(shape.size(), -1);
  return {dtype, std::move(shape), std::move(split)};
}

void ExpectRefused(const Result<TensorType>& r, std::vector<std::string> says) {
  ASSERT_FALSE(r.ok()) << "accepted: " << Describe(*r);
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  for (const std::string& s : says) {
    EXPECT_NE(r.status().message().find(s), std::string::npos)
        << r.status().ToString() << " does not say " << s;
  }
}

TEST(LaxTypeTest, RowsAreFoundByNameAndUnknownNamesAreRefused) {
  for (std::string_view name : {"max", "eq", "select_n", "reshape", "dot_general", "gather", "sort",
                                "cumsum", "is_finite"}) {
    ASSERT_THAT(OpCodeNamed(name), IsOk()) << name;
    EXPECT_EQ(OpName(*OpCodeNamed(name)), name);
  }
  const auto unknown = OpCodeNamed("no_such_primitive");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no_such_primitive"), std::string::npos);
}

TEST(LaxTypeTest, VariadicRowsTakeOneOrMoreOperands) {
  EXPECT_TRUE(TakesOperandCount(*OpCodeNamed("concatenate"), 1));
  EXPECT_TRUE(TakesOperandCount(*OpCodeNamed("concatenate"), 5));
  EXPECT_FALSE(TakesOperandCount(*OpCodeNamed("concatenate"), 0));
  EXPECT_FALSE(TakesOperandCount(*OpCodeNamed("max"), 3));
  ExpectRefused(TypeOf({}, "concatenate"), {"concatenate", "one or more operands"});
}

TEST(LaxTypeTest, ComparisonsGiveBoolAndElementwiseOperandsMustBeOneType) {
  const TensorType x = T(DType::kF32, {4, 6}, {0, -1});
  const auto lt = TypeOf({x, x}, "lt");
  ASSERT_THAT(lt, IsOk());
  EXPECT_EQ(*lt, T(DType::kBool, {4, 6}, {0, -1}));
  ExpectRefused(TypeOf({x, T(DType::kF32, {4, 6})}, "max"), {"max", "differ"});
  ExpectRefused(TypeOf({T(DType::kF32, {2}), T(DType::kF32, {2})}, "shift_left"),
                {"shift_left takes", "f32"});
}

TEST(LaxTypeTest, BroadcastInDimCutsTheDimensionsItBroadcastsAsItsAttrSays) {
  // attr digit d (4 bits) = 1 + the mesh axis of result dimension d.
  const TensorType row = T(DType::kF32, {1, 6});
  const auto cut = TypeOf({row}, "broadcast_in_dim", {4, 3, 6, 0, 2}, (1 << 0) | (2 << 4));
  ASSERT_THAT(cut, IsOk());
  EXPECT_EQ(*cut, T(DType::kF32, {4, 3, 6}, {0, 1, -1}));
  const auto kept = TypeOf({T(DType::kF32, {6}, {1})}, "broadcast_in_dim", {4, 6, 1}, 1);
  ASSERT_THAT(kept, IsOk());
  EXPECT_EQ(*kept, T(DType::kF32, {4, 6}, {0, 1}));
  // A dimension that comes whole from the operand cannot be cut: that needs the block.
  ExpectRefused(TypeOf({row}, "broadcast_in_dim", {4, 3, 6, 0, 2}, 1 << 8),
                {"broadcast_in_dim", "dimension 2", "whole"});
  ExpectRefused(TypeOf({row}, "broadcast_in_dim", {4, 3, 6, 0, 2}, 1 << 12), {"beyond"});
  ExpectRefused(TypeOf({row}, "broadcast_in_dim", {4, 3, 6, 0, 2}, 0.5), {"whole number"});
}

TEST(LaxTypeTest, ReshapeKeepsACutThatLeadsTheDimensionsItIsMergedOrSplitWith) {
  const TensorType x = T(DType::kI8, {4, 6}, {0, -1});
  const auto split = TypeOf({x}, "reshape", {4, 2, 3});
  ASSERT_THAT(split, IsOk());
  EXPECT_EQ(*split, T(DType::kI8, {4, 2, 3}, {0, -1, -1}));
  // Merged with the dimensions after it: each shard's rows are one run of the result.
  const auto merged = TypeOf({x}, "reshape", {24});
  ASSERT_THAT(merged, IsOk());
  EXPECT_EQ(*merged, T(DType::kI8, {24}, {0}));
  // [b, t, d] cut on d, split into heads: the cut goes to the heads.
  const auto heads = TypeOf({T(DType::kF32, {2, 3, 8}, {-1, -1, 1})}, "reshape", {2, 3, 4, 2});
  ASSERT_THAT(heads, IsOk());
  EXPECT_EQ(*heads, T(DType::kF32, {2, 3, 4, 2}, {-1, -1, 1, -1}));
  // Squeezed and expanded dimensions of size 1 leave a cut where it is.
  const auto squeezed = TypeOf({T(DType::kF32, {2, 1, 6}, {-1, -1, 0})}, "reshape", {2, 6, 1});
  ASSERT_THAT(squeezed, IsOk());
  EXPECT_EQ(*squeezed, T(DType::kF32, {2, 6, 1}, {-1, 0, -1}));
  // Two cuts, each leading its own group, on a 2x2 mesh.
  const auto both = TypeOf({T(DType::kF32, {4, 2, 6}, {0, -1, 1})}, "reshape", {8, 2, 3});
  ASSERT_THAT(both, IsOk());
  EXPECT_EQ(*both, T(DType::kF32, {8, 2, 3}, {0, 1, -1}));
  // A cut behind the dimension that leads its group would need other shards' elements.
  ExpectRefused(TypeOf({T(DType::kI8, {4, 6}, {-1, 0})}, "reshape", {24}),
                {"dimension 1 is cut along mesh axis 0", "behind dimension 0"});
  ExpectRefused(TypeOf({T(DType::kF32, {4, 2, 6}, {0, 1, -1})}, "reshape", {8, 6}),
                {"dimension 1 is cut along mesh axis 1", "[8,6]"});
  ExpectRefused(TypeOf({x}, "reshape", {5, 5}), {"reshape", "[5,5]"});
  // Without elements only dimensions 0 to d kept as they are keep d's cut.
  const auto empty = TypeOf({T(DType::kF32, {4, 0}, {0, -1})}, "reshape", {4, 0, 3});
  ASSERT_THAT(empty, IsOk());
  EXPECT_EQ(*empty, T(DType::kF32, {4, 0, 3}, {0, -1, -1}));
  ExpectRefused(TypeOf({T(DType::kF32, {4, 0}, {0, -1})}, "reshape", {0, 4}),
                {"dimension 0 is cut along mesh axis 0"});
}

TEST(LaxTypeTest, DotGeneralKeepsBatchAndFreeCutsAndIsPartialOverACutContraction) {
  // [b, m, k] x [b, k, n], b cut along 0 in both, k cut along 1 in both.
  const TensorType lhs = T(DType::kF32, {2, 4, 6}, {0, -1, 1});
  const TensorType rhs = T(DType::kF32, {2, 6, 8}, {0, 1, -1});
  const auto out = TypeOf({lhs, rhs}, "dot_general", {1, 2, 1, 1, 0, 0});
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(*out, T(DType::kF32, {2, 4, 8}, {0, -1, -1}));  // partial along axis 1
  ExpectRefused(
      TypeOf({lhs, T(DType::kF32, {2, 6, 8}, {0, -1, -1})}, "dot_general", {1, 2, 1, 1, 0, 0}),
      {"contracting dimension 2 of lhs (cut along mesh axis 1)",
       "1 of rhs (not cut) must be cut alike"});
  ExpectRefused(TypeOf({lhs, rhs}, "dot_general", {1, 2}), {"dot_general", "params"});
  // i8 operands accumulating in i32: the preferred element type.
  const auto i32 = TypeOf({T(DType::kI8, {3, 4}), T(DType::kI8, {4, 5})}, "dot_general",
                          {1, 1, 0, 0}, static_cast<double>(DType::kI32));
  ASSERT_THAT(i32, IsOk());
  EXPECT_EQ(i32->dtype, DType::kI32);
}

TEST(LaxTypeTest, LayoutPrimitivesRefuseToCutIntoACutDimension) {
  const TensorType x = T(DType::kF32, {4, 6}, {-1, 1});
  ExpectRefused(TypeOf({x}, "rev", {1}), {"rev", "dimension 1 is cut along mesh axis 1"});
  ExpectRefused(TypeOf({x}, "slice", {0, 0, 4, 3, 1, 1}),
                {"slice", "dimension 1 is cut along mesh axis 1"});
  const auto whole = TypeOf({x}, "slice", {1, 0, 3, 6, 1, 1});
  ASSERT_THAT(whole, IsOk());
  EXPECT_EQ(*whole, T(DType::kF32, {2, 6}, {-1, 1}));
  ExpectRefused(TypeOf({x, x}, "concatenate", {}, 1),
                {"concatenate", "dimension 1 is cut along mesh axis 1"});
  ExpectRefused(TypeOf({x}, "argmax", {1}, static_cast<double>(DType::kI32)),
                {"argmax", "axis 1 is cut along mesh axis 1"});
  ExpectRefused(TypeOf({x}, "transpose_nd", {0, 0}), {"transpose_nd", "permutation"});
}

TEST(LaxTypeTest, GatherCutsItsRowsAsTheIndicesAreCut) {
  // An embedding lookup: table [10, 8] replicated, ids [6, 1] cut along axis 0.
  const auto rows = TypeOf({T(DType::kF32, {10, 8}), T(DType::kI32, {6, 1}, {0, -1})}, "gather",
                           {1, 1, 1, 0, 1, 0, 1, 8});
  ASSERT_THAT(rows, IsOk());
  EXPECT_EQ(*rows, T(DType::kF32, {6, 8}, {0, -1}));
  ExpectRefused(TypeOf({T(DType::kF32, {10, 8}, {0, -1}), T(DType::kI32, {6, 1})}, "gather",
                       {1, 1, 1, 0, 1, 0, 1, 8}),
                {"gather", "replicated"});
  ExpectRefused(
      TypeOf({T(DType::kF32, {10, 8}), T(DType::kI32, {6, 2})}, "gather", {1, 1, 1, 0, 1, 0, 1, 8}),
      {"gather", "the 1 start indices"});
}

}  // namespace
}  // namespace atl::ir
