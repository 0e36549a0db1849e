// The cpu backend's ops (cpu_ops.h: every unary op of the table, matmul with transposes, bias
// add, reductions, softmax, layer norm, cross-entropy, transpose, SGD, Adam, the grouped and
// gating ops) run by the interpreter shard by shard: row- or column-split results must
// reassemble into the whole-tensor result, and partial results (a sum over a cut dimension)
// must add up to it.
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/ir/ir.h"
#include "compute/interpreter.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/nn.h"
#include "kernels/optim.h"
#include "kernels/shape_ops.h"
#include "kernels/topk.h"
#include "tests/kernels/kernel_checks.h"
#include "tests/kernels/reference_ops.h"
#include "tests/kernels/shards.h"
#include "tests/kernels/test_tensors.h"
#include "tests/status_matchers.h"

namespace atl::compute {
namespace {

using ir::OpCode;
using testutil::Assemble;
using testutil::Input;
using testutil::RandomF32;
using testutil::RandomI32;
using testutil::ShardOf;
using testutil::SplitDim;
using testutil::Type;

// Appends an op whose type InferType gives; returns its result as an operand.
ir::Operand Append(ir::FunctionDef& fn, OpCode code, std::vector<ir::Operand> operands,
                   double attr = 0.0) {
  ir::Op op{code, std::move(operands), attr, {}};
  Result<ir::TensorType> type = ir::InferType(fn, op);
  EXPECT_THAT(type, IsOk()) << ir::OpName(code) << ": " << type.status().ToString();
  op.type = type.ok() ? *type : ir::TensorType{};
  fn.ops.push_back(std::move(op));
  return {ir::Operand::kOp, static_cast<int32_t>(fn.ops.size()) - 1, 0.0};
}

// Runs `fn` on `num_shards` shards of a 1-D mesh and puts each output back together:
// split outputs are assembled, outputs listed in `partial` are summed over the shards, and
// replicated ones are taken from shard 0 after checking that every shard agrees.
std::vector<Tensor> RunShards(const ir::FunctionDef& fn, int num_shards,
                              const std::vector<Tensor>& globals,
                              const std::set<size_t>& partial = {}) {
  const Status valid = ir::Validate(fn, num_shards);
  EXPECT_THAT(valid, IsOk());
  const std::vector<ir::TensorType> types = ir::OutputTypes(fn);
  std::vector<std::vector<Tensor>> per_output(types.size());
  for (int s = 0; s < num_shards; ++s) {
    std::vector<Tensor> local;
    for (size_t i = 0; i < globals.size(); ++i) {
      local.push_back(ShardOf(globals[i], SplitDim(fn.inputs[i]), s, num_shards));
    }
    Result<std::vector<Tensor>> outs = RunFunction(fn, s, num_shards, std::move(local));
    EXPECT_THAT(outs, IsOk());
    if (!outs.ok()) return {};
    for (size_t o = 0; o < types.size(); ++o) per_output[o].push_back((*outs)[o]);
  }
  std::vector<Tensor> result;
  for (size_t o = 0; o < types.size(); ++o) {
    std::vector<Tensor>& shards = per_output[o];
    if (SplitDim(types[o]) >= 0) {
      result.push_back(Assemble(shards, SplitDim(types[o]), types[o].shape));
    } else if (partial.count(o) != 0) {
      Tensor sum = shards[0];
      for (int s = 1; s < num_shards; ++s) {
        for (int64_t i = 0; i < sum.num_elements(); ++i) {
          sum.as<float>()[i] += shards[s].as<float>()[i];
        }
      }
      result.push_back(std::move(sum));
    } else {
      for (int s = 1; s < num_shards; ++s) EXPECT_EQ(shards[s], shards[0]) << "output " << o;
      result.push_back(shards[0]);
    }
  }
  return result;
}

void ExpectNear(const Tensor& got, const Tensor& want, double tolerance, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double w = want.as<float>()[i];
    ASSERT_NEAR(got.as<float>()[i], w, tolerance * (1 + std::abs(w))) << what << " element " << i;
  }
}

// The gradients of a 2-layer MLP's cross-entropy loss, the data-parallel way: x and labels
// row-split, weights replicated; weight gradients and the loss come out partial.
// Inputs: x [b,d], labels [b], w1 [d,h], b1 [h], w2 [h,c], b2 [c].
// Outputs: loss, dw1, db1, dw2, db2 (all partial), hidden activations (row-split).
ir::FunctionDef MlpGradients(int64_t b, int64_t d, int64_t h, int64_t c) {
  ir::FunctionDef fn;
  fn.name = "mlp_grads";
  fn.inputs = {Type(DType::kF32, {b, d}, 0), Type(DType::kI32, {b}, 0), Type(DType::kF32, {d, h}),
               Type(DType::kF32, {h}),       Type(DType::kF32, {h, c}), Type(DType::kF32, {c})};
  const auto x = Input(0), labels = Input(1), w1 = Input(2), b1 = Input(3), w2 = Input(4),
             b2 = Input(5);
  const auto z1 = Append(fn, OpCode::kBiasAdd, {Append(fn, OpCode::kMatmul, {x, w1}), b1});
  const auto a1 = Append(fn, OpCode::kGelu, {z1});
  const auto logits = Append(fn, OpCode::kBiasAdd, {Append(fn, OpCode::kMatmul, {a1, w2}), b2});
  const auto loss = Append(fn, OpCode::kCrossEntropyLoss, {logits, labels}, static_cast<double>(b));
  const auto dlogits = Append(fn, OpCode::kCrossEntropyGrad, {logits, labels});
  const auto dw2 = Append(fn, OpCode::kMatmul, {a1, dlogits}, ir::MatmulAttr(true, false));
  const auto db2 = Append(fn, OpCode::kReduceSum, {dlogits}, 0);
  const auto da1 = Append(fn, OpCode::kMatmul, {dlogits, w2}, ir::MatmulAttr(false, true));
  const auto dz1 = Append(fn, OpCode::kGeluGrad, {da1, z1});
  const auto dw1 = Append(fn, OpCode::kMatmul, {x, dz1}, ir::MatmulAttr(true, false));
  const auto db1 = Append(fn, OpCode::kReduceSum, {dz1}, 0);
  fn.outputs = {loss, dw1, db1, dw2, db2, a1};
  return fn;
}

TEST(CpuOpsTest, DataParallelGradientsAddUpToTheSingleDeviceOnes) {
  constexpr int64_t kB = 8, kD = 5, kH = 6, kC = 3;
  const ir::FunctionDef fn = MlpGradients(kB, kD, kH, kC);
  std::mt19937 rng(21);
  const std::vector<Tensor> inputs = {
      RandomF32(rng, {kB, kD}, -1, 1), RandomI32(rng, {kB}, 0, kC - 1),
      RandomF32(rng, {kD, kH}, -1, 1), RandomF32(rng, {kH}, -1, 1),
      RandomF32(rng, {kH, kC}, -1, 1), RandomF32(rng, {kC}, -1, 1)};
  const std::set<size_t> partial = {0, 1, 2, 3, 4};
  const std::vector<Tensor> one = RunShards(fn, 1, inputs);
  ASSERT_EQ(one.size(), 6u);
  for (int shards : {2, 4}) {
    const std::vector<Tensor> many = RunShards(fn, shards, inputs, partial);
    ASSERT_EQ(many.size(), 6u);
    for (size_t o = 0; o < one.size(); ++o) {
      ExpectNear(many[o], one[o], 1e-5,
                 "output " + std::to_string(o) + " on " + std::to_string(shards) + " shards");
    }
  }
  // The loss is the kernel's whole-batch cross-entropy; each gradient matches a central
  // difference of that loss (which checks every transpose and the backward wiring).
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor h, kernels::Matmul(one[5], inputs[4], {}));
  for (int64_t i = 0; i < kB; ++i) {
    for (int64_t j = 0; j < kC; ++j) h.as<float>()[i * kC + j] += inputs[5].as<float>()[j];
  }
  ATOLL_ASSERT_OK_AND_ASSIGN(kernels::CrossEntropyResult ce, kernels::CrossEntropy(h, inputs[1]));
  EXPECT_NEAR(one[0].as<float>()[0], ce.loss.as<float>()[0], 1e-6);
  const double eps = 1e-2;
  for (size_t param : {2u, 3u, 4u, 5u}) {  // w1, b1, w2, b2; their gradients are outputs 1..4
    for (int64_t e = 0; e < inputs[param].num_elements(); e += 3) {
      std::vector<Tensor> plus = inputs, minus = inputs;
      plus[param].as<float>()[e] += static_cast<float>(eps);
      minus[param].as<float>()[e] -= static_cast<float>(eps);
      const double numeric = (double{RunShards(fn, 1, plus)[0].as<float>()[0]} -
                              RunShards(fn, 1, minus)[0].as<float>()[0]) /
                             (2 * eps);
      EXPECT_NEAR(one[param - 1].as<float>()[e], numeric, 2e-3)
          << "input " << param << " element " << e;
    }
  }
}

// op(a) x op(b) against a loop, for every transpose: once with op(a)'s rows split, once
// with op(b)'s columns split.
TEST(CpuOpsTest, MatmulWithTransposesOnRowAndColumnShards) {
  constexpr int64_t kM = 6, kK = 5, kN = 4;
  std::mt19937 rng(22);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Shape a_shape = ta ? Shape{kK, kM} : Shape{kM, kK};
      const Shape b_shape = tb ? Shape{kN, kK} : Shape{kK, kN};
      const Tensor a = RandomF32(rng, a_shape);
      const Tensor b = RandomF32(rng, b_shape);
      Tensor want(DType::kF32, {kM, kN});
      for (int64_t i = 0; i < kM; ++i) {
        for (int64_t j = 0; j < kN; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < kK; ++p) {
            sum += double{a.as<float>()[ta ? p * kM + i : i * kK + p]} *
                   b.as<float>()[tb ? j * kK + p : p * kN + j];
          }
          want.as<float>()[i * kN + j] = static_cast<float>(sum);
        }
      }
      for (bool split_rows : {true, false}) {
        SCOPED_TRACE(::testing::Message() << "ta " << ta << " tb " << tb << " rows " << split_rows);
        ir::FunctionDef fn;
        fn.name = "mm";
        fn.inputs = {Type(DType::kF32, a_shape, split_rows ? (ta ? 1 : 0) : -1),
                     Type(DType::kF32, b_shape, split_rows ? -1 : (tb ? 0 : 1))};
        fn.outputs = {Append(fn, OpCode::kMatmul, {Input(0), Input(1)}, ir::MatmulAttr(ta, tb))};
        EXPECT_EQ(SplitDim(fn.ops[0].type), split_rows ? 0 : 1);
        const std::vector<Tensor> out = RunShards(fn, 2, {a, b});
        ASSERT_EQ(out.size(), 1u);
        ExpectNear(out[0], want, 1e-5, "matmul");
      }
    }
  }
}

// Layer norm forward and backward, then softmax, on row shards, against the kernels on the
// whole tensors.
TEST(CpuOpsTest, LayerNormAndSoftmaxOnRowShards) {
  constexpr int64_t kRows = 6, kD = 7;
  std::mt19937 rng(23);
  const Tensor x = RandomF32(rng, {kRows, kD});
  const Tensor dy = RandomF32(rng, {kRows, kD});
  const Tensor gamma = RandomF32(rng, {kD});
  const Tensor beta = RandomF32(rng, {kD});
  ir::FunctionDef fn;
  fn.name = "ln";
  fn.inputs = {Type(DType::kF32, {kRows, kD}, 0), Type(DType::kF32, {kRows, kD}, 0),
               Type(DType::kF32, {kD}), Type(DType::kF32, {kD})};
  const double eps = 1e-3;
  const auto y = Append(fn, OpCode::kLayerNorm, {Input(0), Input(2), Input(3)}, eps);
  const std::vector<ir::Operand> grad_args = {Input(1), Input(0), Input(2)};
  fn.outputs = {y, Append(fn, OpCode::kSoftmax, {y}),
                Append(fn, OpCode::kLayerNormGradX, grad_args, eps),
                Append(fn, OpCode::kLayerNormGradGamma, grad_args, eps),
                Append(fn, OpCode::kLayerNormGradBeta, grad_args, eps)};
  const std::vector<Tensor> out = RunShards(fn, 3, {x, dy, gamma, beta}, {3, 4});
  ASSERT_EQ(out.size(), 5u);
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor want_y, kernels::LayerNorm(x, gamma, beta, eps));
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor want_s, kernels::Softmax(want_y));
  ATOLL_ASSERT_OK_AND_ASSIGN(kernels::LayerNormGrads g,
                             kernels::LayerNormBackward(dy, x, gamma, eps));
  EXPECT_EQ(out[0], want_y);
  EXPECT_EQ(out[1], want_s);
  EXPECT_EQ(out[2], g.dx);
  ExpectNear(out[3], g.dgamma, 1e-5, "dgamma");
  ExpectNear(out[4], g.dbeta, 1e-5, "dbeta");
}

// A top-k gate on row shards: logits = x wg, each row's top-k values and indices, their
// softmax and one column of each, against the kernels on the whole tensors.
TEST(CpuOpsTest, TopKGateAndColumnsOnRowShards) {
  constexpr int64_t kRows = 6, kWidth = 5, kExperts = 4, kK = 2;
  std::mt19937 rng(27);
  const Tensor x = RandomF32(rng, {kRows, kWidth});
  const Tensor wg = RandomF32(rng, {kWidth, kExperts});
  ir::FunctionDef fn;
  fn.name = "gate";
  fn.inputs = {Type(DType::kF32, {kRows, kWidth}, 0), Type(DType::kF32, {kWidth, kExperts})};
  const auto logits = Append(fn, OpCode::kMatmul, {Input(0), Input(1)});
  const auto values = Append(fn, OpCode::kTopKValues, {logits}, kK);
  const auto indices = Append(fn, OpCode::kTopKIndices, {logits}, kK);
  const auto weights = Append(fn, OpCode::kSoftmax, {values});
  fn.outputs = {values, indices, Append(fn, OpCode::kColumn, {indices}, 1),
                Append(fn, OpCode::kColumn, {weights}, 0)};
  const std::vector<Tensor> out = RunShards(fn, 3, {x, wg});
  ASSERT_EQ(out.size(), 4u);
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor want_logits, kernels::Matmul(x, wg, {}));
  ATOLL_ASSERT_OK_AND_ASSIGN(kernels::TopKResult want, kernels::TopK(want_logits, kK));
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor want_weights, kernels::Softmax(want.values));
  EXPECT_EQ(out[0], want.values);
  EXPECT_EQ(out[1], want.indices);
  ASSERT_EQ(out[2].shape(), (Shape{kRows}));
  ASSERT_EQ(out[3].shape(), (Shape{kRows}));
  for (int64_t r = 0; r < kRows; ++r) {
    EXPECT_EQ(out[2].as<int32_t>()[r], want.indices.as<int32_t>()[r * kK + 1]) << "row " << r;
    EXPECT_EQ(out[3].as<float>()[r], want_weights.as<float>()[r * kK]) << "row " << r;
  }
}

// Routed rows of any number (none included) take the gate ops row by row too.
TEST(CpuOpsTest, TopKAndColumnTakeRoutedRowsOfAnyLength) {
  ir::FunctionDef fn;
  fn.name = "routed";
  fn.inputs = {Type(DType::kF32, {kDynamicDim, 3}, 0)};
  const auto indices = Append(fn, OpCode::kTopKIndices, {Input(0)}, 1);
  fn.outputs = {indices, Append(fn, OpCode::kColumn, {indices}, 0)};
  ASSERT_THAT(ir::Validate(fn, 2), IsOk());
  const Tensor rows = Tensor::F32({2, 3}, {0.5f, 2.0f, -1.0f, 3.0f, 3.0f, 1.0f});
  Result<std::vector<Tensor>> out = RunFunction(fn, 1, 2, {rows});
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ((*out)[0], Tensor::I32({2, 1}, {1, 0}));  // a tie goes to the lower index
  EXPECT_EQ((*out)[1], Tensor::I32({2}, {1, 0}));
  Result<std::vector<Tensor>> none = RunFunction(fn, 0, 2, {Tensor(DType::kF32, {0, 3})});
  ASSERT_THAT(none, IsOk());
  EXPECT_EQ((*none)[1].shape(), (Shape{0}));
}

// Every row of atoll/unary_ops.def: its op code and its kernel, by the same name.
struct UnaryRow {
  OpCode code;
  kernels::UnaryFn fn;
};
constexpr UnaryRow kUnaryRows[] = {
#define ATOLL_UNARY_OP(Name, name) {OpCode::k##Name, kernels::UnaryFn::k##Name},
#include "atoll/unary_ops.def"
};

// Each unary op of the table, in a function over row-split x on 2 shards, equals its
// double-precision reference; its IR type is x's, and i32 is refused naming the op.
TEST(CpuOpsTest, EveryUnaryOpOnRowShardsMatchesItsReference) {
  std::mt19937 rng(27);
  for (const UnaryRow& row : kUnaryRows) {
    SCOPED_TRACE(std::string(ir::OpName(row.code)));
    EXPECT_EQ(ir::OpName(row.code), kernels::UnaryFnName(row.fn));
    ir::FunctionDef fn;
    fn.name = "unary";
    fn.inputs = {Type(DType::kF32, {6, 5}, 0)};
    fn.outputs = {Append(fn, row.code, {Input(0)})};
    EXPECT_EQ(fn.ops[0].type, fn.inputs[0]);
    const Tensor x =
        RandomF32(rng, {6, 5}, testutil::DomainOf(row.fn).lo, testutil::DomainOf(row.fn).hi);
    const std::vector<Tensor> out = RunShards(fn, 2, {x});
    ASSERT_EQ(out.size(), 1u);
    std::vector<double> want;
    for (double v : x.ToDoubles()) want.push_back(testutil::RefUnary(row.fn, v));
    testutil::ExpectClose(out[0], {6, 5}, want, 1e-6, 2e-6);

    ir::FunctionDef ints = fn;
    ints.inputs = {Type(DType::kI32, {6, 5}, 0)};
    const Result<ir::TensorType> refused = ir::InferType(ints, ints.ops[0]);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find(std::string(ir::OpName(row.code)) +
                                              " takes f32, bf16, f16 or f64"),
              std::string::npos)
        << refused.status().ToString();
  }
}

// Unary ops, transpose, a reduction over a kept dimension and an SGD step on column shards.
TEST(CpuOpsTest, UnaryTransposeReduceAndSgdOnColumnShards) {
  std::mt19937 rng(24);
  const Tensor x = RandomF32(rng, {3, 4}, 0.5f, 2.0f);
  const Tensor g = RandomF32(rng, {3, 4});
  ir::FunctionDef fn;
  fn.name = "misc";
  fn.inputs = {Type(DType::kF32, {3, 4}, 1), Type(DType::kF32, {3, 4}, 1)};
  const auto t = Append(fn, OpCode::kTranspose, {Append(fn, OpCode::kLog, {Input(0)})});
  fn.outputs = {Append(fn, OpCode::kTanh, {t}), Append(fn, OpCode::kReduceSum, {Input(0)}, 0),
                Append(fn, OpCode::kSgdUpdate, {Input(0), Input(1)}, 0.25)};
  EXPECT_EQ(SplitDim(fn.ops[1].type), 0);  // the cut moved with its dimension
  const std::vector<Tensor> out = RunShards(fn, 2, {x, g});
  ASSERT_EQ(out.size(), 3u);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      const float v = x.as<float>()[i * 4 + j];
      EXPECT_NEAR(out[0].as<float>()[j * 3 + i], std::tanh(std::log(v)), 1e-6);
      EXPECT_FLOAT_EQ(out[2].as<float>()[i * 4 + j], v - 0.25f * g.as<float>()[i * 4 + j]);
    }
  }
  for (int64_t j = 0; j < 4; ++j) {
    double sum = 0;
    for (int64_t i = 0; i < 3; ++i) sum += x.as<float>()[i * 4 + j];
    EXPECT_NEAR(out[1].as<float>()[j], sum, 1e-5);
  }
}

// A [] tensor beside a row-split tensor is broadcast as a scalar is, in its own dtype: an i64
// beyond 2^53 (which a double would round) stays exact, on either side of the op.
TEST(CpuOpsTest, ARankZeroTensorBroadcastsInArithmeticInItsOwnDType) {
  constexpr int64_t kBig = (int64_t{1} << 53) + 1;
  ir::FunctionDef fn;
  fn.name = "rank0";
  fn.inputs = {Type(DType::kI64, {4}, 0), Type(DType::kI64, {})};
  fn.outputs = {Append(fn, OpCode::kAdd, {Input(0), Input(1)}),
                Append(fn, OpCode::kSub, {Input(1), Input(0)})};
  const std::vector<Tensor> out =
      RunShards(fn, 2, {Tensor::I64({4}, {0, 1, -1, 2}), Tensor::I64({}, {kBig})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], Tensor::I64({4}, {kBig, kBig + 1, kBig - 1, kBig + 2}));
  EXPECT_EQ(out[1], Tensor::I64({4}, {kBig, kBig - 1, kBig + 1, kBig - 2}));

  ir::FunctionDef f64;
  f64.name = "rank0_f64";
  f64.inputs = {Type(DType::kF64, {4}, 0), Type(DType::kF64, {})};
  f64.outputs = {Append(f64, OpCode::kDiv, {Input(0), Input(1)})};
  const std::vector<Tensor> q =
      RunShards(f64, 2, {Tensor::F64({4}, {1, 2, 3, 4}), Tensor::F64({}, {3})});
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0], Tensor::F64({4}, {1.0 / 3, 2.0 / 3, 1.0, 4.0 / 3}));
}

// Adam on column shards, with the step as an input: each shard's param, m and v are its
// block of the kernel's whole-tensor step.
TEST(CpuOpsTest, AdamOnColumnShardsMatchesTheKernel) {
  std::mt19937 rng(25);
  const Tensor param = RandomF32(rng, {3, 4});
  const Tensor grad = RandomF32(rng, {3, 4});
  const Tensor m = RandomF32(rng, {3, 4});
  const Tensor v = RandomF32(rng, {3, 4}, 0.0f, 2.0f);
  ir::FunctionDef fn;
  fn.name = "adam";
  const ir::TensorType type = Type(DType::kF32, {3, 4}, 1);
  fn.inputs = {type, type, type, type, Type(DType::kI32, {})};
  std::vector<ir::Operand> operands = {Input(0), Input(1), Input(2), Input(3), Input(4)};
  for (double h : {0.05, 0.8, 0.99, 1e-6, 0.01}) operands.push_back({ir::Operand::kScalar, 0, h});
  fn.outputs = {Append(fn, OpCode::kAdamParam, operands), Append(fn, OpCode::kAdamM, operands),
                Append(fn, OpCode::kAdamV, operands)};
  const std::vector<Tensor> out = RunShards(fn, 2, {param, grad, m, v, Tensor::I32({}, {3})});
  ASSERT_EQ(out.size(), 3u);
  ATOLL_ASSERT_OK_AND_ASSIGN(kernels::AdamState want, kernels::AdamUpdate(param, grad, m, v, 3,
                                                                          {.learning_rate = 0.05f,
                                                                           .beta1 = 0.8f,
                                                                           .beta2 = 0.99f,
                                                                           .epsilon = 1e-6f,
                                                                           .weight_decay = 0.01f}));
  EXPECT_EQ(out[0], want.param);
  EXPECT_EQ(out[1], want.m);
  EXPECT_EQ(out[2], want.v);
  // A step below 1 is the kernel's error, reported by the shard.
  std::vector<Tensor> zero_step = {param, grad, m, v, Tensor::I32({}, {0})};
  Result<std::vector<Tensor>> bad = RunFunction(fn, 0, 1, zero_step);
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument) << bad.status().ToString();
}

// Rows routed to three experts, one per shard, in uneven numbers (one expert gets none):
// each shard's grouped matmuls use its own weights, and rows scatter-added back by token
// and gathered by token land where the ids say.
TEST(CpuOpsTest, GroupedOpsRunEachShardsRowsThroughItsOwnGroup) {
  constexpr int64_t kK = 4, kN = 3, kTokens = 6;
  constexpr int kExperts = 3;
  std::mt19937 rng(26);
  const Tensor w = RandomF32(rng, {kExperts, kK, kN});
  const Tensor table = RandomF32(rng, {kTokens, kN});
  ir::FunctionDef fn;
  fn.name = "experts";
  fn.inputs = {Type(DType::kF32, {kDynamicDim, kK}, 0), Type(DType::kF32, {kDynamicDim, kN}, 0),
               Type(DType::kI32, {kDynamicDim}, 0), Type(DType::kF32, {kExperts, kK, kN}, 0),
               Type(DType::kF32, {kTokens, kN})};
  const auto x = Input(0), dy = Input(1), ids = Input(2), weights = Input(3);
  const auto y = Append(fn, OpCode::kGroupedMatmul, {x, weights});
  fn.outputs = {y, Append(fn, OpCode::kGroupedMatmul, {dy, weights}, 1),
                Append(fn, OpCode::kGroupedWeightGrad, {x, dy}, kExperts),
                Append(fn, OpCode::kScatterAddRows, {y, ids}, kTokens),
                Append(fn, OpCode::kGatherRows, {Input(4), ids})};
  ASSERT_THAT(ir::Validate(fn, kExperts), IsOk());
  const int64_t rows[kExperts] = {2, 0, 3};
  const std::vector<int32_t> token_ids[kExperts] = {{4, 1}, {}, {0, 4, 5}};
  for (int e = 0; e < kExperts; ++e) {
    SCOPED_TRACE(::testing::Message() << "expert " << e);
    const Tensor xe = RandomF32(rng, {rows[e], kK});
    const Tensor dye = RandomF32(rng, {rows[e], kN});
    std::vector<Tensor> local = {xe, dye, Tensor::I32({rows[e]}, token_ids[e]),
                                 ShardOf(w, 0, e, kExperts), table};
    Result<std::vector<Tensor>> out = RunFunction(fn, e, kExperts, std::move(local));
    ASSERT_THAT(out, IsOk());
    ATOLL_ASSERT_OK_AND_ASSIGN(Tensor we, kernels::Reshape(ShardOf(w, 0, e, kExperts), {kK, kN}));
    ATOLL_ASSERT_OK_AND_ASSIGN(Tensor want_y, kernels::Matmul(xe, we, {}));
    ATOLL_ASSERT_OK_AND_ASSIGN(Tensor want_dx, kernels::Matmul(dye, we, {false, true}));
    ATOLL_ASSERT_OK_AND_ASSIGN(Tensor want_dw, kernels::Matmul(xe, dye, {true, false}));
    EXPECT_EQ((*out)[0], want_y);
    EXPECT_EQ((*out)[1], want_dx);
    EXPECT_EQ((*out)[2].shape(), (Shape{1, kK, kN}));  // zeros for the expert with no rows
    EXPECT_EQ((*out)[2].as<float>().size(), want_dw.as<float>().size());
    for (int64_t i = 0; i < want_dw.num_elements(); ++i) {
      EXPECT_EQ((*out)[2].as<float>()[i], want_dw.as<float>()[i]);
    }
    Tensor scattered(DType::kF32, {kTokens, kN});  // this shard's rows only: its partial
    ASSERT_EQ((*out)[4].shape(), (Shape{rows[e], kN}));
    for (int64_t r = 0; r < rows[e]; ++r) {
      for (int64_t j = 0; j < kN; ++j) {
        const int32_t token = token_ids[e][r];
        EXPECT_EQ((*out)[4].as<float>()[r * kN + j], table.as<float>()[token * kN + j]);
        scattered.as<float>()[token * kN + j] += want_y.as<float>()[r * kN + j];
      }
    }
    EXPECT_EQ((*out)[3], scattered);
  }
}

// A shard holding more than one group is refused when it runs, naming the op.
TEST(CpuOpsTest, AGroupedOpOnAShardWithSeveralGroupsFailsClearly) {
  ir::FunctionDef fn;
  fn.name = "experts";
  fn.inputs = {Type(DType::kF32, {kDynamicDim, 2}, 0), Type(DType::kF32, {2, 2, 2}, 0)};
  fn.outputs = {Append(fn, OpCode::kGroupedMatmul, {Input(0), Input(1)})};
  Result<std::vector<Tensor>> out =
      RunFunction(fn, 0, 1, {Tensor(DType::kF32, {1, 2}), Tensor(DType::kF32, {2, 2, 2})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("one group"), std::string::npos) << out.status().ToString();
}

}  // namespace
}  // namespace atl::compute
