// Every op of the table in every floating dtype, through the type rules and the cpu backend:
// f64 computes what f32 computes (the kernel tests check its precision), bf16 and f16 give
// exactly the f32 result on the widened operands rounded once into them, and an op that does
// not take a dtype is refused when the function is built, naming the dtypes it takes.
#include <cmath>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/ir/ir.h"
#include "compute/interpreter.h"
#include "kernels/cast.h"
#include "tests/kernels/shards.h"
#include "tests/kernels/test_tensors.h"
#include "tests/status_matchers.h"

namespace atl::compute {
namespace {

using ir::OpCode;
using testutil::Type;

// An operand of a case: of the float dtype under test, or an integer tensor whose values
// index something (ids, labels in [0, bound)), or Adam's i32 step.
struct Arg {
  enum Kind { kFloat, kIds, kStep } kind;
  Shape shape;
  int32_t split_dim = -1;
  int64_t bound = 0;
};
Arg F(Shape shape, int32_t split_dim = -1) { return {Arg::kFloat, std::move(shape), split_dim}; }
Arg Ids(Shape shape, int64_t bound, int32_t split_dim = -1) {
  return {Arg::kIds, std::move(shape), split_dim, bound};
}

// One op applied to its args (then `scalars` as scalar operands), on one device.
struct Case {
  std::string name;
  OpCode code;
  std::vector<Arg> args;
  double attr = 0;
  std::vector<double> scalars = {};
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> Cases() {
  std::vector<Case> cases = {
      {"add", OpCode::kAdd, {F({4, 3}), F({4, 3})}},
      {"sub", OpCode::kSub, {F({4, 3}), F({4, 3})}},
      {"mul", OpCode::kMul, {F({4, 3}), F({4, 3})}},
      {"div", OpCode::kDiv, {F({4, 3}), F({4, 3})}},
      {"matmul", OpCode::kMatmul, {F({4, 3}), F({3, 5})}, 0},
      {"matmul_ta", OpCode::kMatmul, {F({3, 4}), F({3, 5})}, 1},
      {"matmul_tb", OpCode::kMatmul, {F({4, 3}), F({5, 3})}, 2},
      {"matmul_tab", OpCode::kMatmul, {F({3, 4}), F({5, 3})}, 3},
      {"gelu_grad", OpCode::kGeluGrad, {F({4, 3}), F({4, 3})}},
      {"bias_add", OpCode::kBiasAdd, {F({4, 3}), F({3})}},
      {"reduce_sum_0", OpCode::kReduceSum, {F({4, 3})}, 0},
      {"reduce_sum_1", OpCode::kReduceSum, {F({4, 3})}, 1},
      {"softmax", OpCode::kSoftmax, {F({4, 3})}},
      {"layer_norm", OpCode::kLayerNorm, {F({4, 3}), F({3}), F({3})}, 1e-5},
      {"layer_norm_grad_x", OpCode::kLayerNormGradX, {F({4, 3}), F({4, 3}), F({3})}, 1e-5},
      {"layer_norm_grad_gamma", OpCode::kLayerNormGradGamma, {F({4, 3}), F({4, 3}), F({3})}, 1e-5},
      {"layer_norm_grad_beta", OpCode::kLayerNormGradBeta, {F({4, 3}), F({4, 3}), F({3})}, 1e-5},
      {"cross_entropy_loss", OpCode::kCrossEntropyLoss, {F({4, 3}), Ids({4}, 3)}, 4},
      {"cross_entropy_grad", OpCode::kCrossEntropyGrad, {F({4, 3}), Ids({4}, 3)}},
      {"transpose", OpCode::kTranspose, {F({4, 3})}},
      {"sgd_update", OpCode::kSgdUpdate, {F({4, 3}), F({4, 3})}, 0.1},
      {"adam_param",
       OpCode::kAdamParam,
       {F({4, 3}), F({4, 3}), F({4, 3}), F({4, 3}), {Arg::kStep, {}}},
       0,
       {1e-3, 0.9, 0.999, 1e-8, 0}},
      {"grouped_matmul", OpCode::kGroupedMatmul, {F({4, 3}, 0), F({1, 3, 5}, 0)}},
      {"grouped_weight_grad", OpCode::kGroupedWeightGrad, {F({4, 3}, 0), F({4, 5}, 0)}, 1},
      {"scatter_add_rows", OpCode::kScatterAddRows, {F({4, 3}), Ids({4}, 6)}, 6},
      {"gather_rows", OpCode::kGatherRows, {F({6, 3}), Ids({4}, 6)}},
      {"top_k_values", OpCode::kTopKValues, {F({4, 3})}, 2},
      {"top_k_indices", OpCode::kTopKIndices, {F({4, 3})}, 2},
      {"column", OpCode::kColumn, {F({4, 3})}, 1},
      {"cast_to_f32", OpCode::kCast, {F({4, 3})}, static_cast<double>(DType::kF32)},
      {"cast_to_i64", OpCode::kCast, {F({4, 3})}, static_cast<double>(DType::kI64)},
      {"unary_grad",
       OpCode::kUnaryGrad,
       {F({4, 3}), F({4, 3})},
       static_cast<double>(OpCode::kTanh)},
      {"reduce_sum_grad", OpCode::kReduceSumGrad, {F({3}), F({4, 3})}, 0},
      {"softmax_grad", OpCode::kSoftmaxGrad, {F({4, 3}), F({4, 3})}},
      {"top_k_grad", OpCode::kTopKGrad, {F({4, 2}), F({4, 3})}, 2},
      {"column_grad", OpCode::kColumnGrad, {F({4}), F({4, 3})}, 1},
      {"fill_like", OpCode::kFillLike, {F({4, 3})}, 0.5},
  };
  for (const char* name :
       {"exp", "log", "tanh", "relu", "neg", "sqrt", "rsqrt", "gelu", "sigmoid"}) {
    for (size_t code = 0; code < ir::kNumOpCodes; ++code) {
      if (ir::OpName(static_cast<OpCode>(code)) == name) {
        cases.push_back({name, static_cast<OpCode>(code), {F({4, 3})}});
      }
    }
  }
  return cases;
}

// The case as a function of `dtype`'s floats and i64 ids.
ir::FunctionDef Build(const Case& c, DType dtype) {
  ir::FunctionDef fn;
  fn.name = c.name;
  ir::Op op{c.code, {}, c.attr, {}};
  for (const Arg& a : c.args) {
    const DType t = a.kind == Arg::kFloat ? dtype : a.kind == Arg::kIds ? DType::kI64 : DType::kI32;
    fn.inputs.push_back(Type(t, a.shape, a.split_dim));
    op.operands.push_back(testutil::Input(static_cast<int32_t>(fn.inputs.size()) - 1));
  }
  for (double s : c.scalars) op.operands.push_back({ir::Operand::kScalar, 0, s});
  const Result<ir::TensorType> type = ir::InferType(fn, op);  // Accepts() reports a refusal
  if (type.ok()) op.type = *type;
  fn.ops.push_back(std::move(op));
  fn.outputs = {{ir::Operand::kOp, 0, 0.0}};
  return fn;
}

// The case's inputs: floats in [0.5, 2) (where every op is defined) held by `dtype`, as
// `dtype`; ids as i64.
std::vector<Tensor> Inputs(const Case& c, DType dtype, std::mt19937& rng) {
  std::vector<Tensor> inputs;
  for (const Arg& a : c.args) {
    if (a.kind == Arg::kStep) {
      inputs.push_back(Tensor::I32({}, {1}));
    } else if (a.kind == Arg::kIds) {
      std::uniform_int_distribution<int64_t> id(0, a.bound - 1);
      Tensor t(DType::kI64, a.shape);
      for (int64_t& v : t.as<int64_t>()) v = id(rng);
      inputs.push_back(std::move(t));
    } else {
      const Tensor wide = testutil::RandomF64(rng, a.shape, 0.5, 2.0);
      inputs.push_back(kernels::Cast(wide, dtype).value());
    }
  }
  return inputs;
}

// The inputs with every float widened to `dtype` (exactly, from a narrower one).
std::vector<Tensor> Widened(const std::vector<Tensor>& inputs, DType dtype) {
  std::vector<Tensor> out;
  for (const Tensor& t : inputs)
    out.push_back(IsFloating(t.dtype()) ? kernels::Cast(t, dtype).value() : t);
  return out;
}

Result<Tensor> RunOne(const Case& c, DType dtype, std::vector<Tensor> inputs) {
  const ir::FunctionDef fn = Build(c, dtype);
  ATOLL_ASSIGN_OR_RETURN(std::vector<Tensor> out, RunFunction(fn, 0, 1, std::move(inputs)));
  return std::move(out.at(0));
}

// Whether the op's rule takes `dtype` for its floats; OK or the rule's refusal.
Status Accepts(const Case& c, DType dtype) {
  const ir::FunctionDef fn = Build(c, dtype);
  return ir::InferType(fn, fn.ops[0]).status();
}

class DTypeOpsTest : public testing::TestWithParam<Case> {};

TEST_P(DTypeOpsTest, F64ComputesWhatF32Computes) {
  const Case& c = GetParam();
  std::mt19937 rng(17);
  const std::vector<Tensor> f32 = Inputs(c, DType::kF32, rng);
  ASSERT_THAT(Accepts(c, DType::kF64), IsOk());
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor narrow, RunOne(c, DType::kF32, f32));
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor wide, RunOne(c, DType::kF64, Widened(f32, DType::kF64)));
  const ir::FunctionDef fn = Build(c, DType::kF64);
  EXPECT_EQ(wide.dtype(), fn.ops[0].type.dtype);
  if (IsFloating(narrow.dtype()) && c.code != OpCode::kCast) {
    EXPECT_EQ(wide.dtype(), DType::kF64) << "a float result is f64";
  }
  const std::vector<double> a = narrow.ToDoubles(), b = wide.ToDoubles();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-5 * (1 + std::abs(b[i]))) << "element " << i;
  }
}

// bf16 and f16: taken by the ops whose rule says so, with the f32 result on the widened
// operands rounded once into them; refused by the others, naming what they take.
TEST_P(DTypeOpsTest, StorageDTypesRoundTheF32ResultOnceOrAreRefused) {
  const Case& c = GetParam();
  for (DType storage : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(storage));
    const Status accepted = Accepts(c, storage);
    if (!accepted.ok()) {
      EXPECT_EQ(accepted.code(), Code::kInvalidArgument);
      EXPECT_NE(accepted.message().find("takes f32 or f64"), std::string::npos)
          << accepted.ToString();
      continue;
    }
    std::mt19937 rng(18);
    const std::vector<Tensor> inputs = Inputs(c, storage, rng);
    ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor got, RunOne(c, storage, inputs));
    ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor f32,
                               RunOne(c, DType::kF32, Widened(inputs, DType::kF32)));
    const DType want_dtype = Build(c, storage).ops[0].type.dtype;
    ASSERT_EQ(got.dtype(), want_dtype);
    ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor rounded, kernels::Cast(f32, want_dtype));
    EXPECT_EQ(got, rounded) << "bit for bit";
    // Within the format's precision of f32's: half an ulp, at most 2^-8 (bf16) or 2^-11
    // (f16) of the value.
    const double ulp = storage == DType::kBF16 ? 0x1p-7 : 0x1p-10;
    const std::vector<double> g = got.ToDoubles(), w = f32.ToDoubles();
    for (size_t i = 0; i < g.size(); ++i) {
      EXPECT_LE(std::abs(g[i] - w[i]), ulp / 2 * std::abs(w[i]) + 1e-30) << "element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryOp, DTypeOpsTest, testing::ValuesIn(Cases()),
                         [](const testing::TestParamInfo<Case>& op) { return op.param.name; });

// Which storage-dtype ops the rules take: the ones listed for them, no more, no fewer.
TEST(DTypeOpsTableTest, StorageDTypesAreTakenExactlyWhereTheTableSays) {
  std::vector<std::string> refused;
  for (const Case& c : Cases()) {
    if (!Accepts(c, DType::kBF16).ok()) refused.push_back(c.name);
  }
  EXPECT_EQ(refused,
            (std::vector<std::string>{
                "layer_norm", "layer_norm_grad_x", "layer_norm_grad_gamma", "layer_norm_grad_beta",
                "sgd_update", "adam_param", "grouped_matmul", "grouped_weight_grad",
                "scatter_add_rows", "gather_rows", "top_k_values", "top_k_indices", "top_k_grad"}));
}

TEST(DTypeOpsTableTest, MixedAndWrongDTypesAreRefusedNamingWhatIsTaken) {
  struct Bad {
    OpCode code;
    std::vector<ir::TensorType> inputs;
    double attr;
    std::string says;
  };
  const std::vector<Bad> bad = {
      {OpCode::kMatmul, {Type(DType::kBF16, {2, 2}), Type(DType::kF32, {2, 2})}, 0, "one dtype"},
      {OpCode::kMatmul,
       {Type(DType::kI64, {2, 2}), Type(DType::kI64, {2, 2})},
       0,
       "matmul takes f32, bf16, f16 or f64, got i64"},
      {OpCode::kAdd, {Type(DType::kF64, {2}), Type(DType::kF32, {2})}, 0, "operand types differ"},
      {OpCode::kBiasAdd,
       {Type(DType::kBF16, {2, 2}), Type(DType::kF32, {2})},
       0,
       "bias [n] of x's dtype"},
      {OpCode::kCrossEntropyLoss,
       {Type(DType::kF32, {2, 2}), Type(DType::kF32, {2})},
       2,
       "takes i32 or i64 labels"},
      {OpCode::kCast,
       {Type(DType::kF32, {2})},
       static_cast<double>(kNumDTypes),
       fmt::format("a dtype code in [0, {})", kNumDTypes)},
      {OpCode::kCast, {Type(DType::kF32, {2})}, 0.5, "a dtype code"},
  };
  for (const Bad& b : bad) {
    ir::FunctionDef fn;
    fn.inputs = b.inputs;
    ir::Op op{b.code, {}, b.attr, {}};
    for (size_t i = 0; i < b.inputs.size(); ++i)
      op.operands.push_back(testutil::Input(static_cast<int32_t>(i)));
    const Result<ir::TensorType> type = ir::InferType(fn, op);
    ASSERT_FALSE(type.ok()) << b.says;
    EXPECT_NE(type.status().message().find(b.says), std::string::npos) << type.status().ToString();
  }
}

}  // namespace
}  // namespace atl::compute
