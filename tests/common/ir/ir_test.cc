// The IR: msgpack round trip of a FunctionDef, ir::Validate's refusals, ShardShape, and
// dynamic (data-dependent) dimensions.
#include "common/ir/ir.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <msgpack.hpp>

#include "tests/common/proto/samples.h"
#include "tests/status_matchers.h"

namespace atl::ir {
namespace {

using proto::samples::Sample;

TensorType Type(DType dtype, Shape shape, int32_t split_dim = -1) {
  return SplitType(dtype, std::move(shape), split_dim);
}
Operand Input(int32_t i) { return {Operand::kInput, i, 0.0}; }
Operand OpResult(int32_t i) { return {Operand::kOp, i, 0.0}; }
Operand Scalar(double v) { return {Operand::kScalar, 0, v}; }

TEST(FunctionDefTest, MsgpackRoundTrip) {
  const FunctionDef fn = Sample<FunctionDef>();
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, fn);
  FunctionDef back;
  msgpack::unpack(buffer.data(), buffer.size()).get().convert(back);
  EXPECT_EQ(back, fn);
  EXPECT_EQ(back.name, "dense");
  ASSERT_EQ(back.ops.size(), 4u);
  EXPECT_EQ(back.ops[0].code, OpCode::kMatmul);
  EXPECT_EQ(back.ops[2].attr, 12.5);
  EXPECT_EQ(back.ops[3].params, (std::vector<int64_t>{0, 1, 1, 0, 2, 3, 3, 2}));
  EXPECT_EQ(back.ops[1].operands[1].scalar, 0.5);
  EXPECT_EQ(back.inputs[1].split, (std::vector<int32_t>{-1, -1}));
  EXPECT_THAT(Validate(back, 4), IsOk());
}

TEST(ShardShapeTest, DividesTheSplitDimensionOnly) {
  EXPECT_EQ(ShardShape(Type(DType::kF32, {8, 6}, 0), {4}), (Shape{2, 6}));
  EXPECT_EQ(ShardShape(Type(DType::kF32, {8, 6}, 1), {3}), (Shape{8, 2}));
  EXPECT_EQ(ShardShape(Type(DType::kF32, {8, 6}), {4}), (Shape{8, 6}));
  EXPECT_EQ(ShardShape(Type(DType::kF32, {8, 6}, 0), {1}), (Shape{8, 6}));
  // On a 2x3 mesh: rows over axis 1 (3 blocks), columns over axis 0 (2 blocks).
  const TensorType both{DType::kF32, {6, 4}, {1, 0}};
  EXPECT_EQ(ShardShape(both, {2, 3}), (Shape{2, 2}));
  // Shard 5 sits at mesh coordinates (1, 2): rows 4.., columns 2...
  EXPECT_EQ(ShardOrigin(both, {2, 3}, 5), (Shape{4, 2}));
  EXPECT_EQ(ShardOrigin(both, {2, 3}, 1), (Shape{2, 0}));
}

TEST(ShardShapeTest, OnlyTheFirstReplicaOfABlockIsTheFirst) {
  // Rows over axis 0 of a 2x2 mesh: axis 1 holds replicas.
  const TensorType rows{DType::kF32, {4, 4}, {0, -1}};
  EXPECT_TRUE(IsFirstReplica(rows, {2, 2}, 0));
  EXPECT_FALSE(IsFirstReplica(rows, {2, 2}, 1));
  EXPECT_TRUE(IsFirstReplica(rows, {2, 2}, 2));
  EXPECT_FALSE(IsFirstReplica(rows, {2, 2}, 3));
  EXPECT_EQ(ShardOrigin(rows, {2, 2}, 3), ShardOrigin(rows, {2, 2}, 2));
}

TEST(OperandTypeTest, ScalarsAndBadReferencesHaveNoType) {
  const FunctionDef fn = Sample<FunctionDef>();
  EXPECT_EQ(OperandType(fn, Scalar(1)), nullptr);
  EXPECT_EQ(OperandType(fn, Input(2)), nullptr);
  EXPECT_EQ(OperandType(fn, OpResult(-1)), nullptr);
  ASSERT_NE(OperandType(fn, OpResult(0)), nullptr);
  EXPECT_EQ(*OperandType(fn, OpResult(0)), Type(DType::kF32, {8, 3}, 0));
  EXPECT_EQ(OutputTypes(fn),
            (std::vector<TensorType>{Type(DType::kF32, {8, 3}, 0), Type(DType::kF32, {8, 5}, 0)}));
}

// x: f32[8,4] split 0, y: same; op 0 = x + y; output op 0.
FunctionDef AddFunction() {
  const TensorType t = Type(DType::kF32, {8, 4}, 0);
  FunctionDef fn;
  fn.name = "add";
  fn.inputs = {t, t};
  fn.ops = {Op{OpCode::kAdd, {Input(0), Input(1)}, 0.0, t}};
  fn.outputs = {OpResult(0)};
  return fn;
}

TEST(ValidateTest, AcceptsWellFormedFunctions) {
  for (int shards : {1, 2, 4, 8}) {
    EXPECT_THAT(Validate(AddFunction(), shards), IsOk()) << shards;
  }
  EXPECT_THAT(Validate(Sample<FunctionDef>(), 4), IsOk());
  // Outputs may be inputs; ops may take a scalar on either side.
  FunctionDef fn = AddFunction();
  fn.ops.push_back(Op{OpCode::kSub, {Scalar(1), OpResult(0)}, 0.0, fn.ops[0].type});
  fn.outputs = {Input(1), OpResult(1)};
  EXPECT_THAT(Validate(fn, 2), IsOk());
}

struct BadCase {
  std::string what;
  FunctionDef fn;
  int num_shards = 2;
  std::string mentions;  // a piece of the expected message, or empty
};

std::vector<BadCase> BadCases() {
  std::vector<BadCase> cases;
  auto add = [&](std::string what, auto mutate, int shards = 2, std::string mentions = "") {
    FunctionDef fn = AddFunction();
    mutate(fn);
    cases.push_back({std::move(what), std::move(fn), shards, std::move(mentions)});
  };
  add(
      "input index out of range", [](FunctionDef& f) { f.ops[0].operands[1] = Input(2); }, 2,
      "does not exist");
  add("negative input index", [](FunctionDef& f) { f.ops[0].operands[0] = Input(-1); });
  add(
      "self reference", [](FunctionDef& f) { f.ops[0].operands[1] = OpResult(0); }, 2,
      "not earlier");
  add(
      "forward reference",
      [](FunctionDef& f) {
        f.ops.insert(f.ops.begin(), Op{OpCode::kAdd, {Input(0), OpResult(1)}, 0.0, f.ops[0].type});
        f.ops[1].operands = {Input(0), Input(1)};
      },
      2, "not earlier");
  add("negative op index", [](FunctionDef& f) { f.ops[0].operands[0] = OpResult(-1); });
  add("unknown operand kind", [](FunctionDef& f) { f.ops[0].operands[0].kind = 7; });
  add("output refers to a missing op", [](FunctionDef& f) { f.outputs = {OpResult(1)}; });
  add(
      "scalar output", [](FunctionDef& f) { f.outputs = {Scalar(2)}; }, 2, "scalar");
  add(
      "no outputs", [](FunctionDef& f) { f.outputs.clear(); }, 2, "no outputs");
  add(
      "no devices", [](FunctionDef&) {}, 0);
  add(
      "shape mismatch",
      [](FunctionDef& f) {
        f.inputs[1].shape = {8, 5};
      },
      2, "differ");
  add(
      "dtype mismatch", [](FunctionDef& f) { f.inputs[1].dtype = DType::kI32; }, 2, "differ");
  add(
      "layout mismatch", [](FunctionDef& f) { f.inputs[1].split[0] = -1; }, 2, "differ");
  add(
      "split not divisible", [](FunctionDef&) {}, 3, "(3 devices)");
  add(
      "split for another rank", [](FunctionDef& f) { f.inputs[0].split.push_back(-1); }, 2,
      "split for 3 dimensions");
  add(
      "split along a missing mesh axis", [](FunctionDef& f) { f.inputs[0].split[1] = 1; }, 2,
      "has 1 axes");
  add(
      "two dimensions along one axis", [](FunctionDef& f) { f.inputs[0].split[1] = 0; }, 2,
      "two dimensions");
  add(
      "mesh of another size",
      [](FunctionDef& f) {
        f.mesh = {2, 2};
      },
      2, "holds 4 devices");
  add(
      "negative dimension",
      [](FunctionDef& f) {
        f.inputs[0].shape = {-3, 4};
      },
      2, "negative dimension");
  add(
      "declared result type wrong", [](FunctionDef& f) { f.ops[0].type.split[0] = -1; }, 2,
      "result type is wrong");
  add(
      "two scalars",
      [](FunctionDef& f) {
        f.ops[0].operands = {Scalar(1), Scalar(2)};
      },
      2, "two scalars");
  add("one operand", [](FunctionDef& f) { f.ops[0].operands.pop_back(); });
  add("unknown op code", [](FunctionDef& f) { f.ops[0].code = static_cast<OpCode>(250); });
  add(
      "matmul inner mismatch",
      [](FunctionDef& f) {
        f.ops[0] = Op{OpCode::kMatmul, {Input(0), Input(1)}, 0.0, Type(DType::kF32, {8, 4}, 0)};
      },
      2, "[m,k] x [k,n]");
  add(
      "matmul of i32",
      [](FunctionDef& f) {
        f.inputs = {Type(DType::kI32, {8, 4}, 0), Type(DType::kI32, {4, 3})};
        f.ops[0] = Op{OpCode::kMatmul, {Input(0), Input(1)}, 0.0, Type(DType::kI32, {8, 3}, 0)};
      },
      2, "takes f32, bf16, f16 or f64");
  add(
      "matmul with a split right operand",
      [](FunctionDef& f) {
        f.inputs = {Type(DType::kF32, {8, 4}, 0), Type(DType::kF32, {4, 2}, 0)};
        f.ops[0] = Op{OpCode::kMatmul, {Input(0), Input(1)}, 0.0, Type(DType::kF32, {8, 2}, 0)};
      },
      2, "replicated");
  add(
      "matmul split along columns",
      [](FunctionDef& f) {
        f.inputs = {Type(DType::kF32, {8, 4}, 1), Type(DType::kF32, {4, 2})};
        f.ops[0] = Op{OpCode::kMatmul, {Input(0), Input(1)}, 0.0, Type(DType::kF32, {8, 2}, 1)};
      },
      2, "replicated");
  add(
      "matmul of a scalar",
      [](FunctionDef& f) {
        f.ops[0] = Op{OpCode::kMatmul, {Input(0), Scalar(2)}, 0.0, f.inputs[0]};
      },
      2, "tensors");
  add(
      "negative spin time",
      [](FunctionDef& f) {
        f.ops[0] = Op{OpCode::kSpin, {Input(0)}, -1.0, f.inputs[0]};
      },
      2, ">= 0");
  add("spin of two tensors", [](FunctionDef& f) {
    f.ops[0] = Op{OpCode::kSpin, {Input(0), Input(1)}, 1.0, f.inputs[0]};
  });
  // Sizes that int64 cannot count: an input's, and a result's from countable operands.
  add(
      "input of too many elements",
      [](FunctionDef& f) {
        f.inputs[0].shape = {int64_t{1} << 40, int64_t{1} << 40};
        f.inputs[0].split = {-1, -1};
      },
      2, "f32[1099511627776,1099511627776] split [-1,-1] has a negative dimension or more bytes");
  add(
      "input of too many bytes",
      [](FunctionDef& f) {
        f.inputs[0].shape = {int64_t{1} << 31, int64_t{1} << 31};
        f.inputs[0].split = {-1, -1};
      },
      2, "more bytes than an int64 can count");
  add(
      "matmul result of too many elements",
      [](FunctionDef& f) {
        const int64_t big = int64_t{1} << 40;
        f.inputs = {Type(DType::kF32, {big, 1}), Type(DType::kF32, {1, big})};
        f.ops[0] = Op{OpCode::kMatmul, {Input(0), Input(1)}, 0.0, Type(DType::kF32, {big, big})};
      },
      2, "matmul: f32[1099511627776,1099511627776]");
  add(
      "mesh of more devices than int64 counts",
      [](FunctionDef& f) {
        f.mesh = {int64_t{1} << 32, int64_t{1} << 32};
      },
      2, "mesh: shape [4294967296,4294967296] has more elements");
  add(
      "a group count no int64 holds",
      [](FunctionDef& f) {
        f.inputs = {Type(DType::kF32, {8, 4}, 0), Type(DType::kF32, {8, 5}, 0)};
        f.ops[0] = Op{OpCode::kGroupedWeightGrad,
                      {Input(0), Input(1)},
                      1e300,
                      Type(DType::kF32, {2, 4, 5}, 0)};
      },
      2, "group count");
  return cases;
}

TEST(ValidateTest, RefusesMalformedFunctions) {
  for (const BadCase& c : BadCases()) {
    const Status s = Validate(c.fn, c.num_shards);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.what << ": " << s.ToString();
    if (!c.mentions.empty()) {
      EXPECT_NE(s.message().find(c.mentions), std::string::npos) << c.what << ": " << s.ToString();
    }
  }
}

// x: f32[8] split 0; op 0 = filter(x > 0), of dynamic length; op 1 = op 0 * 2.
FunctionDef FilterFunction() {
  const TensorType x = Type(DType::kF32, {8}, 0);
  const TensorType kept = Type(DType::kF32, {kDynamicDim}, 0);
  FunctionDef fn;
  fn.name = "keep";
  fn.inputs = {x};
  fn.ops = {Op{OpCode::kFilter, {Input(0)}, 0.0, kept},
            Op{OpCode::kMul, {OpResult(0), Scalar(2)}, 0.0, kept}};
  fn.outputs = {OpResult(1)};
  return fn;
}

TEST(DynamicShapeTest, AFilterHasADataDependentLengthAndMakesItsFunctionIrregular) {
  FunctionDef fn = FilterFunction();
  EXPECT_THAT(Validate(fn, 4), IsOk());
  EXPECT_TRUE(IsIrregular(fn));
  EXPECT_FALSE(IsIrregular(AddFunction()));
  EXPECT_FALSE(IsStatic(fn.ops[0].type));
  EXPECT_EQ(ShardShape(fn.ops[0].type, {4}), (Shape{kDynamicDim}));
  // A function taking a dynamic input is irregular too, even if its ops are static-typed.
  FunctionDef consumer = AddFunction();
  consumer.inputs = {Type(DType::kF32, {kDynamicDim, 4}, 0),
                     Type(DType::kF32, {kDynamicDim, 4}, 0)};
  consumer.ops[0].type = consumer.inputs[0];
  EXPECT_THAT(Validate(consumer, 3), IsOk());
  EXPECT_TRUE(IsIrregular(consumer));
}

TEST(DynamicShapeTest, ShapeFitsTakesAnySizeOnlyForADynamicDimension) {
  EXPECT_TRUE(ShapeFits({kDynamicDim, 4}, {0, 4}));
  EXPECT_TRUE(ShapeFits({kDynamicDim, 4}, {9, 4}));
  EXPECT_FALSE(ShapeFits({kDynamicDim, 4}, {9, 5}));
  EXPECT_FALSE(ShapeFits({kDynamicDim}, {9, 4}));
  EXPECT_TRUE(ShapeFits({2, 3}, {2, 3}));
  EXPECT_FALSE(ShapeFits({2, 3}, {3, 2}));
}

TEST(DynamicShapeTest, OpsThatNeedAStaticShapeRefuseADynamicOne) {
  FunctionDef reduce = FilterFunction();
  reduce.inputs[0].split = {-1};
  reduce.ops[0].type.split = {-1};
  reduce.ops[1] = Op{OpCode::kAllReduceSum, {OpResult(0)}, 0.0, reduce.ops[0].type};
  Status s = Validate(reduce, 2);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("static shape"), std::string::npos) << s.ToString();

  FunctionDef filter_2d = FilterFunction();
  filter_2d.inputs[0] = Type(DType::kF32, {8, 2}, 0);
  s = Validate(filter_2d, 2);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("1-D"), std::string::npos) << s.ToString();
}

// The kernel-library ops: the shardings InferType accepts and the result types it gives,
// and the ones it refuses with a message naming what it accepts.
struct AcceptedCase {
  std::string what;
  OpCode code;
  std::vector<TensorType> inputs;
  double attr;
  TensorType want;
};
struct RefusedCase {
  std::string what;
  OpCode code;
  std::vector<TensorType> inputs;
  double attr;
  std::string mentions;  // a piece of the message
};

template <typename Case>
Result<TensorType> Infer(const Case& c) {
  FunctionDef fn;
  fn.name = c.what;
  fn.inputs = c.inputs;
  Op op{c.code, {}, c.attr, {}};
  for (size_t i = 0; i < c.inputs.size(); ++i) op.operands.push_back(Input(i));
  return InferType(fn, op);
}

TensorType Axes(DType dtype, Shape shape, std::vector<int32_t> split) {
  return {dtype, std::move(shape), std::move(split)};
}

TEST(ModelOpTypeTest, AcceptedShardingsGiveTheirResultTypes) {
  const DType f = DType::kF32;
  const DType i = DType::kI32;
  const std::vector<AcceptedCase> cases = {
      {"row-split x weights",
       OpCode::kMatmul,
       {Type(f, {8, 4}, 0), Type(f, {4, 3})},
       0,
       Type(f, {8, 3}, 0)},
      {"x^T dy over a cut batch: partial",
       OpCode::kMatmul,
       {Type(f, {8, 4}, 0), Type(f, {8, 3}, 0)},
       MatmulAttr(true, false),
       Type(f, {4, 3})},
      {"dy w^T",
       OpCode::kMatmul,
       {Type(f, {8, 3}, 0), Type(f, {4, 3})},
       MatmulAttr(false, true),
       Type(f, {8, 4}, 0)},
      {"column-split weights",
       OpCode::kMatmul,
       {Type(f, {8, 4}), Type(f, {4, 6}, 1)},
       0,
       Type(f, {8, 6}, 1)},
      {"2-D mesh: rows on axis 0, columns on axis 1",
       OpCode::kMatmul,
       {Axes(f, {8, 4}, {0, -1}), Axes(f, {4, 6}, {-1, 1})},
       0,
       Axes(f, {8, 6}, {0, 1})},
      {"gelu keeps the sharding", OpCode::kGelu, {Type(f, {8, 4}, 1)}, 0, Type(f, {8, 4}, 1)},
      {"bias on row-split x",
       OpCode::kBiasAdd,
       {Type(f, {8, 4}, 0), Type(f, {4})},
       0,
       Type(f, {8, 4}, 0)},
      {"bias cut like x's columns",
       OpCode::kBiasAdd,
       {Type(f, {8, 4}, 1), Type(f, {4}, 0)},
       0,
       Type(f, {8, 4}, 1)},
      {"sum over the cut batch: partial",
       OpCode::kReduceSum,
       {Type(f, {8, 4}, 0)},
       0,
       Type(f, {4})},
      {"sum over a kept dimension", OpCode::kReduceSum, {Type(f, {8, 4}, 0)}, 1, Type(f, {8}, 0)},
      {"softmax of row-split x", OpCode::kSoftmax, {Type(f, {8, 4}, 0)}, 0, Type(f, {8, 4}, 0)},
      {"layer norm",
       OpCode::kLayerNorm,
       {Type(f, {8, 4}, 0), Type(f, {4}), Type(f, {4})},
       1e-5,
       Type(f, {8, 4}, 0)},
      {"layer norm dgamma: partial",
       OpCode::kLayerNormGradGamma,
       {Type(f, {8, 4}, 0), Type(f, {8, 4}, 0), Type(f, {4})},
       1e-5,
       Type(f, {4})},
      {"cross-entropy loss: partial",
       OpCode::kCrossEntropyLoss,
       {Type(f, {8, 3}, 0), Type(i, {8}, 0)},
       8,
       Type(f, {})},
      {"cross-entropy grad",
       OpCode::kCrossEntropyGrad,
       {Type(f, {8, 3}, 0), Type(i, {8}, 0)},
       0,
       Type(f, {8, 3}, 0)},
      {"transpose moves the cut", OpCode::kTranspose, {Type(f, {8, 4}, 0)}, 0, Type(f, {4, 8}, 1)},
      {"sgd", OpCode::kSgdUpdate, {Type(f, {4, 3}), Type(f, {4, 3})}, 0.1, Type(f, {4, 3})},
      {"gelu of routed rows",
       OpCode::kGelu,
       {Type(f, {kDynamicDim, 4}, 0)},
       0,
       Type(f, {kDynamicDim, 4}, 0)},
      {"routed rows by each device's expert",
       OpCode::kGroupedMatmul,
       {Type(f, {kDynamicDim, 4}, 0), Type(f, {3, 4, 5}, 0)},
       0,
       Type(f, {kDynamicDim, 5}, 0)},
      {"dy by each expert's w transposed",
       OpCode::kGroupedMatmul,
       {Type(f, {kDynamicDim, 5}, 0), Type(f, {3, 4, 5}, 0)},
       1,
       Type(f, {kDynamicDim, 4}, 0)},
      {"each expert's weight gradient",
       OpCode::kGroupedWeightGrad,
       {Type(f, {kDynamicDim, 4}, 0), Type(f, {kDynamicDim, 5}, 0)},
       3,
       Type(f, {3, 4, 5}, 0)},
      {"routed rows added back per token: partial",
       OpCode::kScatterAddRows,
       {Type(f, {kDynamicDim, 4}, 0), Type(i, {kDynamicDim}, 0)},
       8,
       Type(f, {8, 4})},
      {"a token's rows gathered for routed ids",
       OpCode::kGatherRows,
       {Type(f, {8, 4}), Type(i, {kDynamicDim}, 0)},
       0,
       Type(f, {kDynamicDim, 4}, 0)},
      {"top-k values of row-split logits",
       OpCode::kTopKValues,
       {Type(f, {8, 4}, 0)},
       2,
       Type(f, {8, 2}, 0)},
      {"top-k indices of routed rows are i32",
       OpCode::kTopKIndices,
       {Type(f, {kDynamicDim, 4}, 0)},
       4,
       Type(i, {kDynamicDim, 4}, 0)},
      {"a column of row-split choices", OpCode::kColumn, {Type(i, {8, 2}, 0)}, 1, Type(i, {8}, 0)},
      {"a column of replicated weights", OpCode::kColumn, {Type(f, {8, 2})}, 0, Type(f, {8})},
      {"a [] tensor broadcast over split rows",
       OpCode::kMul,
       {Type(f, {8, 4}, 0), Type(f, {})},
       0,
       Type(f, {8, 4}, 0)},
      {"unary_grad of gelu",
       OpCode::kUnaryGrad,
       {Type(f, {8, 4}, 0), Type(f, {8, 4}, 0)},
       static_cast<double>(OpCode::kGelu),
       Type(f, {8, 4}, 0)},
      {"unary_grad on routed rows",
       OpCode::kUnaryGrad,
       {Type(f, {kDynamicDim, 4}, 0), Type(f, {kDynamicDim, 4}, 0)},
       static_cast<double>(OpCode::kExp),
       Type(f, {kDynamicDim, 4}, 0)},
      {"reduce_sum_grad over cut rows: the block's rows",
       OpCode::kReduceSumGrad,
       {Type(f, {4}), Type(f, {8, 4}, 0)},
       0,
       Type(f, {8, 4}, 0)},
      {"softmax_grad",
       OpCode::kSoftmaxGrad,
       {Type(f, {8, 4}, 0), Type(f, {8, 4}, 0)},
       0,
       Type(f, {8, 4}, 0)},
      {"top_k_grad",
       OpCode::kTopKGrad,
       {Type(f, {8, 2}, 0), Type(f, {8, 4}, 0)},
       2,
       Type(f, {8, 4}, 0)},
      {"column_grad",
       OpCode::kColumnGrad,
       {Type(f, {8}, 0), Type(f, {8, 3}, 0)},
       2,
       Type(f, {8, 3}, 0)},
      {"fill_like",
       OpCode::kFillLike,
       {Type(f, {kDynamicDim, 3}, 0)},
       1.5,
       Type(f, {kDynamicDim, 3}, 0)},
  };
  for (const AcceptedCase& c : cases) {
    Result<TensorType> got = Infer(c);
    ASSERT_THAT(got, IsOk()) << c.what << ": " << got.status().ToString();
    EXPECT_EQ(*got, c.want) << c.what;
  }
}

TEST(ModelOpTypeTest, OtherShardingsAreRefusedSayingWhatIsAccepted) {
  const DType f = DType::kF32;
  const DType i = DType::kI32;
  const std::vector<RefusedCase> cases = {
      {"contracted dimension cut in one operand only",
       OpCode::kMatmul,
       {Type(f, {8, 4}, 0), Type(f, {8, 3})},
       MatmulAttr(true, false),
       "cut alike in both"},
      {"rows and columns on one mesh axis",
       OpCode::kMatmul,
       {Type(f, {8, 4}, 0), Type(f, {4, 6}, 1)},
       0,
       "different mesh axes"},
      {"transposed inner mismatch",
       OpCode::kMatmul,
       {Type(f, {8, 4}), Type(f, {8, 3})},
       0,
       "[m,k] x [k,n]"},
      {"bad transpose flags",
       OpCode::kMatmul,
       {Type(f, {8, 4}), Type(f, {4, 3})},
       5,
       "transpose_a"},
      {"gelu of i32", OpCode::kGelu, {Type(i, {8})}, 0, "takes f32, bf16, f16 or f64"},
      {"bias cut unlike x",
       OpCode::kBiasAdd,
       {Type(f, {8, 4}, 0), Type(f, {4}, 0)},
       0,
       "cut like x's last dimension"},
      {"reduce over a missing dimension", OpCode::kReduceSum, {Type(f, {8, 4})}, 2, "dimension 2"},
      {"softmax over a cut last dimension",
       OpCode::kSoftmax,
       {Type(f, {8, 4}, 1)},
       0,
       "must not be cut"},
      {"split gamma",
       OpCode::kLayerNorm,
       {Type(f, {8, 4}, 0), Type(f, {4}, 0), Type(f, {4})},
       1e-5,
       "replicated f32[4]"},
      {"zero epsilon",
       OpCode::kLayerNorm,
       {Type(f, {8, 4}), Type(f, {4}), Type(f, {4})},
       0,
       "epsilon"},
      {"labels cut unlike the logits",
       OpCode::kCrossEntropyGrad,
       {Type(f, {8, 3}, 0), Type(i, {8})},
       0,
       "labels must be cut like"},
      {"f32 labels",
       OpCode::kCrossEntropyGrad,
       {Type(f, {8, 3}), Type(f, {8})},
       0,
       "takes i32 or i64 labels"},
      {"loss without the global batch",
       OpCode::kCrossEntropyLoss,
       {Type(f, {8, 3}), Type(i, {8})},
       0,
       "global batch"},
      {"sgd of different types",
       OpCode::kSgdUpdate,
       {Type(f, {4, 3}), Type(f, {4, 3}, 0)},
       0.1,
       "differ"},
      {"transpose of a vector", OpCode::kTranspose, {Type(f, {8})}, 0, "matrix"},
      {"gelu of a dynamic column dimension",
       OpCode::kGelu,
       {Axes(f, {8, kDynamicDim}, {0, -1})},
       0,
       "static shape"},
      {"matmul of routed rows",
       OpCode::kMatmul,
       {Type(f, {kDynamicDim, 4}, 0), Type(f, {4, 3})},
       0,
       "static shape"},
      {"grouped rows not cut",
       OpCode::kGroupedMatmul,
       {Type(f, {6, 4}), Type(f, {3, 4, 5}, 0)},
       0,
       "rows cut along a mesh axis"},
      {"grouped weights not cut",
       OpCode::kGroupedMatmul,
       {Type(f, {6, 4}, 0), Type(f, {3, 4, 5})},
       0,
       "G cut along"},
      {"grouped inner mismatch",
       OpCode::kGroupedMatmul,
       {Type(f, {6, 4}, 0), Type(f, {3, 5, 5}, 0)},
       0,
       "f32[G,4,n]"},
      {"no groups",
       OpCode::kGroupedWeightGrad,
       {Type(f, {6, 4}, 0), Type(f, {6, 5}, 0)},
       0,
       "group count"},
      {"ids cut unlike the rows",
       OpCode::kScatterAddRows,
       {Type(f, {kDynamicDim, 4}, 0), Type(i, {kDynamicDim})},
       8,
       "cut like the rows"},
      {"gather from a cut table",
       OpCode::kGatherRows,
       {Type(f, {8, 4}, 0), Type(i, {5})},
       0,
       "replicated"},
      {"top-k over a cut last dimension",
       OpCode::kTopKValues,
       {Type(f, {8, 4}, 1)},
       2,
       "must not be cut"},
      {"top-k of more than the row holds",
       OpCode::kTopKIndices,
       {Type(f, {8, 4})},
       5,
       "k in [1, n]"},
      {"top-0", OpCode::kTopKValues, {Type(f, {8, 4})}, 0, "k in [1, n]"},
      {"top-k of i32", OpCode::kTopKValues, {Type(i, {8, 4})}, 1, "takes f32 or f64"},
      {"a column past the last", OpCode::kColumn, {Type(f, {8, 2})}, 2, "[0, 2)"},
      {"a fractional column", OpCode::kColumn, {Type(f, {8, 2})}, 0.5, "[0, 2)"},
      {"a column of a vector", OpCode::kColumn, {Type(f, {8})}, 0, "a matrix"},
      {"a column of cut columns", OpCode::kColumn, {Type(f, {8, 2}, 1)}, 0, "must not be cut"},
      {"a [] tensor of another dtype",
       OpCode::kAdd,
       {Type(f, {8}), Type(i, {})},
       0,
       "operand types differ"},
      {"unary_grad of a non-unary op",
       OpCode::kUnaryGrad,
       {Type(f, {8}), Type(f, {8})},
       static_cast<double>(OpCode::kMatmul),
       "the code of a unary op"},
      {"unary_grad of a code out of range",
       OpCode::kUnaryGrad,
       {Type(f, {8}), Type(f, {8})},
       1e9,
       "the code of a unary op"},
      {"unary_grad of mismatched types",
       OpCode::kUnaryGrad,
       {Type(f, {8}, 0), Type(f, {8})},
       static_cast<double>(OpCode::kExp),
       "dy must have the type of exp(x)"},
      {"reduce_sum_grad with dy of the wrong shape",
       OpCode::kReduceSumGrad,
       {Type(f, {8}), Type(f, {8, 4})},
       0,
       "dy must have the type of reduce_sum(x)"},
      {"reduce_sum_grad past the last dimension",
       OpCode::kReduceSumGrad,
       {Type(f, {8}), Type(f, {8, 4})},
       2,
       "reduce_sum over dimension 2"},
      {"softmax_grad over cut columns",
       OpCode::kSoftmaxGrad,
       {Type(f, {8, 4}, 1), Type(f, {8, 4}, 1)},
       0,
       "must not be cut"},
      {"top_k_grad of the wrong k",
       OpCode::kTopKGrad,
       {Type(f, {8, 3}), Type(f, {8, 4})},
       2,
       "dy must have the type of top_k_values(x)"},
      {"column_grad of an i32 x",
       OpCode::kColumnGrad,
       {Type(i, {8}), Type(i, {8, 3})},
       0,
       "column_grad takes f32, bf16, f16 or f64 x, got i32"},
      {"top_k_grad of bf16 (what top-k takes)",
       OpCode::kTopKGrad,
       {Type(DType::kBF16, {8, 2}), Type(DType::kBF16, {8, 4})},
       2,
       "top_k_values takes f32 or f64"},
      {"fill_like of i32",
       OpCode::kFillLike,
       {Type(i, {8})},
       0,
       "fill_like takes f32, bf16, f16 or f64, got i32"},
      {"fill_like with nan", OpCode::kFillLike, {Type(f, {8})}, NAN, "finite"},
  };
  for (const RefusedCase& c : cases) {
    Result<TensorType> got = Infer(c);
    ASSERT_FALSE(got.ok()) << c.what;
    EXPECT_EQ(got.status().code(), Code::kInvalidArgument) << c.what;
    EXPECT_NE(got.status().message().find(c.mentions), std::string::npos)
        << c.what << ": " << got.status().ToString();
  }
}

// Adam's step is an i32 [] input (one compiled function serves every step); its
// hyper-parameters are scalar operands, checked when the function is built.
TEST(ModelOpTypeTest, AdamTakesAStepInputAndScalarHyperParameters) {
  FunctionDef fn;
  fn.name = "adam";
  const TensorType param = Type(DType::kF32, {4, 3}, 1);
  fn.inputs = {param, param, param, param, Type(DType::kI32, {})};
  auto adam = [&](std::vector<double> hyper, Operand step = Input(4)) {
    Op op{OpCode::kAdamM, {Input(0), Input(1), Input(2), Input(3), step}, 0, {}};
    for (double h : hyper) op.operands.push_back(Scalar(h));
    return InferType(fn, op);
  };
  const Result<TensorType> ok = adam({1e-3, 0.9, 0.999, 1e-8, 0});
  ASSERT_THAT(ok, IsOk());
  EXPECT_EQ(*ok, param);
  const std::vector<std::pair<Result<TensorType>, std::string>> refused = {
      {adam({1e-3, 1.0, 0.999, 1e-8, 0}), "betas in [0, 1)"},
      {adam({1e-3, 0.9, 0.999, 0, 0}), "epsilon > 0"},
      {adam({1e-3, 0.9, 0.999, 1e-8}), "takes 10 operands"},
      {adam({1e-3, 0.9, 0.999, 1e-8, 0}, Input(0)), "step must be a replicated i32[]"},
      {adam({1e-3, 0.9, 0.999, 1e-8, 0}, Scalar(1)), "operand 4 is not a tensor"},
  };
  for (const auto& [got, mentions] : refused) {
    ASSERT_FALSE(got.ok()) << mentions;
    EXPECT_NE(got.status().message().find(mentions), std::string::npos) << got.status().ToString();
  }
  fn.inputs[1] = Type(DType::kF32, {4, 3}, 0);  // grad cut unlike param
  EXPECT_FALSE(adam({1e-3, 0.9, 0.999, 1e-8, 0}).ok());
}

// A grouped op's groups are one per device: checked when the slice is known.
TEST(ValidateTest, GroupedOpsNeedOneGroupPerDevice) {
  FunctionDef fn;
  fn.name = "experts";
  fn.inputs = {Type(DType::kF32, {kDynamicDim, 4}, 0), Type(DType::kF32, {4, 4, 5}, 0)};
  Op op{OpCode::kGroupedMatmul, {Input(0), Input(1)}, 0, {}};
  Result<TensorType> type = InferType(fn, op);
  ASSERT_THAT(type, IsOk());
  op.type = *type;
  fn.ops.push_back(op);
  fn.outputs = {OpResult(0)};
  EXPECT_THAT(Validate(fn, 4), IsOk());
  const Status two = Validate(fn, 2);
  EXPECT_EQ(two.code(), Code::kInvalidArgument);
  EXPECT_NE(two.message().find("exactly one group"), std::string::npos) << two.ToString();
  EXPECT_THAT(Validate(fn, 2, /*slice_known=*/false), IsOk());
}

}  // namespace
}  // namespace atl::ir
