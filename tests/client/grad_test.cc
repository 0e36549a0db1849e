// Grad and ValueAndGrad (include/atoll/grad.h) as a user meets them: what they refuse and
// why, where they put the all_reduce_sum of a partial gradient, what their functions
// output, and FunctionBuilder::Call, which inlines them into a step. The numbers of every
// rule are grad_rules_test.cc's.
#include <utility>

#include <gtest/gtest.h>

#include "atoll/grad.h"
#include "client/internal.h"
#include "tests/compute/shard_runner.h"
#include "tests/kernels/test_tensors.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

const ir::FunctionDef& Def(const FunctionBuilder& b) { return HandleAccess::ImplOf(b).def; }

size_t Count(const FunctionBuilder& b, ir::OpCode code) {
  size_t n = 0;
  for (const ir::Op& op : Def(b).ops) n += op.code == code;
  return n;
}

// A data-parallel linear classifier: (x [8,3] rows split, labels, w [3,2], b [2]) -> loss.
FunctionBuilder LinearLoss() {
  FunctionBuilder f("linear");
  const Value x = f.Input(DType::kF32, {8, 3});
  const Value labels = f.Input(DType::kI32, {8});
  const Value w = f.Input(DType::kF32, {3, 2}, Sharding::Replicated());
  const Value b = f.Input(DType::kF32, {2}, Sharding::Replicated());
  f.Output(f.AllReduceSum(f.CrossEntropy(f.BiasAdd(f.Matmul(x, w), b), labels).loss));
  return f;
}

void ExpectRefused(const Result<FunctionBuilder>& g, const std::string& says) {
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Code::kInvalidArgument) << g.status().ToString();
  EXPECT_NE(g.status().message().find(says), std::string::npos) << g.status().ToString();
}

TEST(GradTest, BadInputsAndOutputsAreRefusedSayingWhatIsAccepted) {
  const FunctionBuilder f = LinearLoss();
  ExpectRefused(Grad(f, {}), "at least one input");
  ExpectRefused(Grad(f, {4}), "expected distinct inputs in [0, 4)");
  ExpectRefused(Grad(f, {2, 2}), "expected distinct inputs in [0, 4)");
  ExpectRefused(
      Grad(f, {1}),
      "input 1 is i32[8] split [0]: only float inputs (f32, f64, bf16, f16) have gradients");
  ExpectRefused(Grad(f, {2}, {.outputs = {1}}), "expected distinct outputs in [0, 1)");
  ExpectRefused(Grad(f, {2}, {.outputs = {0, 0}, .cotangents = true}), "distinct outputs");

  FunctionBuilder vector("vector");
  const Value v = vector.Input(DType::kF32, {4});
  vector.Output(vector.Exp(v));
  ExpectRefused(Grad(vector, {0}), "needs a float [] output (a loss)");
  EXPECT_THAT(Grad(vector, {0}, {.cotangents = true}), IsOk());

  FunctionBuilder integer("integer");
  const Value n = integer.Input(DType::kI32, {4});
  integer.Output(integer.Add(n, 1.0));
  integer.Output(integer.Input(DType::kF32, {}));
  ExpectRefused(Grad(integer, {1}, {.cotangents = true}), "output 0 is i32[4]");

  // The builder's own error comes first, naming the transform.
  FunctionBuilder broken("broken");
  broken.Output(
      broken.Matmul(broken.Input(DType::kF32, {2, 3}), broken.Input(DType::kF32, {2, 3})));
  const auto g = Grad(broken, {0});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("Grad: function 'broken'"), std::string::npos);
  EXPECT_NE(g.status().message().find("matmul"), std::string::npos) << g.status().ToString();
}

TEST(GradTest, OpsThatAreNotDifferentiableAreRefusedByName) {
  {
    FunctionBuilder f("filtered");
    const Value x = f.Input(DType::kF32, {6});
    f.Output(f.Exp(f.Filter(x, 0.0)));
    ExpectRefused(Grad(f, {0}, {.cotangents = true}), "op 0 (filter) is not differentiable");
  }
  {
    FunctionBuilder f("updated");
    const Value w = f.Input(DType::kF32, {3}, Sharding::Replicated());
    const Value g = f.Input(DType::kF32, {3}, Sharding::Replicated());
    f.Output(f.ReduceSum(f.SgdUpdate(w, g, 0.1), 0));
    ExpectRefused(Grad(f, {0}), "(sgd_update) is not differentiable (an optimizer step");
  }
  {
    FunctionBuilder f("second_order");
    const Value x = f.Input(DType::kF32, {3}, Sharding::Replicated());
    f.Output(f.ReduceSum(f.GeluBackward(x, x), 0));
    ExpectRefused(Grad(f, {0}), "(gelu_grad) is not differentiable (a gradient op");
  }
  for (const bool max : {true, false}) {
    FunctionBuilder f("extreme");
    const Value x = f.Input(DType::kF64, {3}, Sharding::Replicated());
    f.Output(f.ReduceSum(max ? f.AllReduceMax(x) : f.AllReduceMin(x), 0));
    ExpectRefused(Grad(f, {0}), max ? "op 0 (all_reduce_max) is not differentiable (which member"
                                    : "op 0 (all_reduce_min) is not differentiable (which member");
  }
  {
    // A filter no differentiated input reaches is no obstacle.
    FunctionBuilder f("beside");
    const Value x = f.Input(DType::kF32, {4}, Sharding::Replicated());
    const Value y = f.Input(DType::kF32, {4}, Sharding::Replicated());
    f.Output(f.ReduceSum(x, 0));
    f.Output(f.Filter(y, 0.0));
    EXPECT_THAT(Grad(f, {0}), IsOk());
  }
}

// Integer values carry no gradient: top-k's positions used as row ids do not stop the
// gradient through top-k's values, and contribute none.
TEST(GradTest, IntegerValuesCarryNoGradient) {
  FunctionBuilder f("gate");
  const Value x = f.Input(DType::kF32, {3, 4}, Sharding::Replicated());
  const Value table = f.Input(DType::kF32, {4, 2}, Sharding::Replicated());
  const auto best = f.TopK(x, 1);
  const Value picked = f.GatherRows(table, f.Column(best.indices, 0));  // [3,2]
  const Value chosen = f.ReduceSum(f.Column(best.values, 0), 0);
  f.Output(f.Add(f.ReduceSum(f.ReduceSum(f.Mul(picked, picked), 1), 0), chosen));
  EXPECT_THAT(Grad(f, {0, 1}), IsOk());
}

TEST(GradTest, GradientsOfReplicatedWeightsOverSplitRowsAreAllReducedOnce) {
  const FunctionBuilder f = LinearLoss();
  ATOLL_ASSERT_OK_AND_ASSIGN(const FunctionBuilder g, Grad(f, {0, 2, 3}));
  // w and b: partial sums over each device's rows, completed; x: split like x, no sum. The
  // forward's all-reduce of the loss is not needed by the gradients.
  EXPECT_EQ(Count(g, ir::OpCode::kAllReduceSum), 2u);
  const std::vector<ir::TensorType> types = ir::OutputTypes(Def(g));
  ASSERT_EQ(types.size(), 3u);
  EXPECT_EQ(types[0], Def(f).inputs[0]);
  EXPECT_EQ(types[1], Def(f).inputs[2]);
  EXPECT_EQ(types[2], Def(f).inputs[3]);

  // On 4 shards the gradients are those of 1 shard: the all-reduce makes them whole.
  std::mt19937 rng(5);
  const std::vector<Tensor> args = {
      testutil::RandomF32(rng, {8, 3}, -1, 1), testutil::RandomI32(rng, {8}, 0, 1),
      testutil::RandomF32(rng, {3, 2}, -1, 1), testutil::RandomF32(rng, {2}, -1, 1)};
  ATOLL_ASSERT_OK_AND_ASSIGN(const std::vector<Tensor> one, testutil::RunGlobal(Def(g), 1, args));
  ATOLL_ASSERT_OK_AND_ASSIGN(const std::vector<Tensor> four, testutil::RunGlobal(Def(g), 4, args));
  for (size_t o = 0; o < one.size(); ++o) {
    for (int64_t i = 0; i < one[o].num_elements(); ++i) {
      EXPECT_NEAR(four[o].as<float>()[i], one[o].as<float>()[i], 1e-6) << "gradient " << o;
    }
  }
}

// A partial over one axis of a 2-D mesh is all-reduced along that axis alone, whatever the
// other axis cuts.
TEST(GradTest, APartialOverOneAxisOfAMeshIsAllReducedAlongIt) {
  FunctionBuilder f("two_axes");
  const Value x = f.Input(DType::kF32, {4, 3}, Sharding::Axes({0, -1}));
  const Value w = f.Input(DType::kF32, {3, 2}, Sharding::Axes({-1, 1}));
  f.Output(f.Matmul(x, w));
  // w's gradient x^T dy sums over x's rows, cut along axis 0; x's sums over w's columns, cut
  // along axis 1.
  for (const auto& [input, axis] : {std::pair{1, 0}, std::pair{0, 1}}) {
    ATOLL_ASSERT_OK_AND_ASSIGN(const FunctionBuilder g, Grad(f, {input}, {.cotangents = true}));
    ASSERT_EQ(Count(g, ir::OpCode::kAllReduceSum), 1u) << "input " << input;
    for (const ir::Op& op : Def(g).ops) {
      if (op.code == ir::OpCode::kAllReduceSum) {
        EXPECT_EQ(op.attr, axis) << "input " << input;
      }
    }
    EXPECT_EQ(ir::OutputTypes(Def(g))[0], Def(f).inputs[input]);
  }
}

TEST(GradTest, ValueAndGradOutputsTheValuesThenTheGradientsAndUnusedInputsGetZeros) {
  FunctionBuilder f("square");
  const Value x = f.Input(DType::kF32, {3}, Sharding::Replicated());
  f.Input(DType::kF32, {2}, Sharding::Replicated());  // no output depends on it
  f.Output(f.ReduceSum(f.Mul(x, x), 0));
  f.Output(f.Neg(x));
  ATOLL_ASSERT_OK_AND_ASSIGN(const FunctionBuilder g, ValueAndGrad(f, {0, 1}));
  EXPECT_EQ(Def(g).name, "square_value_and_grad");
  EXPECT_EQ(Def(g).inputs, Def(f).inputs);
  const Tensor xs = Tensor::F32({3}, {1, -2, 3});
  ATOLL_ASSERT_OK_AND_ASSIGN(const std::vector<Tensor> out,
                             testutil::RunGlobal(Def(g), 1, {xs, Tensor::F32({2}, {7, 8})}));
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0], Tensor::F32({}, {14}));
  EXPECT_EQ(out[1], Tensor::F32({3}, {-1, 2, -3}));
  EXPECT_EQ(out[2], Tensor::F32({3}, {2, -4, 6}));
  EXPECT_EQ(out[3], Tensor::F32({2}, {0, 0}));
}

// With cotangents, several outputs: the sum of each output's vector-Jacobian product; an
// output that is an input passes its cotangent straight through.
TEST(GradTest, CotangentsOfSeveralOutputsAddUp) {
  FunctionBuilder f("two");
  const Value x = f.Input(DType::kF32, {2}, Sharding::Replicated());
  f.Output(f.Mul(x, 3.0));
  f.Output(x);
  ATOLL_ASSERT_OK_AND_ASSIGN(const FunctionBuilder g,
                             Grad(f, {0}, {.outputs = {0, 1}, .cotangents = true}));
  ASSERT_EQ(Def(g).inputs.size(), 3u);  // x, then a cotangent per output
  ATOLL_ASSERT_OK_AND_ASSIGN(
      const std::vector<Tensor> out,
      testutil::RunGlobal(
          Def(g), 1,
          {Tensor::F32({2}, {5, 6}), Tensor::F32({2}, {1, 2}), Tensor::F32({2}, {10, 20})}));
  EXPECT_EQ(out[0], Tensor::F32({2}, {13, 26}));
}

TEST(GradTest, CallInlinesAGradientIntoAStep) {
  const FunctionBuilder loss = LinearLoss();
  ATOLL_ASSERT_OK_AND_ASSIGN(const FunctionBuilder grad, ValueAndGrad(loss, {2, 3}));
  FunctionBuilder step("step");
  const Value x = step.Input(DType::kF32, {8, 3});
  const Value labels = step.Input(DType::kI32, {8});
  const Value w = step.Input(DType::kF32, {3, 2}, Sharding::Replicated());
  const Value b = step.Input(DType::kF32, {2}, Sharding::Replicated());
  const std::vector<Value> out = step.Call(grad, {x, labels, w, b});
  ASSERT_THAT(step.status(), IsOk());
  ASSERT_EQ(out.size(), 3u);
  step.Output(out[0]);
  step.Output(step.SgdUpdate(w, out[1], 0.5));
  ATOLL_ASSERT_OK_AND_ASSIGN(const FunctionBuilder::ValueType t, step.TypeOf(out[1]));
  EXPECT_EQ(t.dtype, DType::kF32);
  EXPECT_EQ(t.shape, (Shape{3, 2}));
  EXPECT_EQ(t.sharding.axes, (std::vector<int>{-1, -1}));

  std::mt19937 rng(6);
  const std::vector<Tensor> args = {
      testutil::RandomF32(rng, {8, 3}, -1, 1), testutil::RandomI32(rng, {8}, 0, 1),
      testutil::RandomF32(rng, {3, 2}, -1, 1), testutil::RandomF32(rng, {2}, -1, 1)};
  ATOLL_ASSERT_OK_AND_ASSIGN(const std::vector<Tensor> direct,
                             testutil::RunGlobal(Def(grad), 2, args));
  ATOLL_ASSERT_OK_AND_ASSIGN(const std::vector<Tensor> stepped,
                             testutil::RunGlobal(Def(step), 2, args));
  EXPECT_EQ(stepped[0], direct[0]);
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_FLOAT_EQ(stepped[1].as<float>()[i],
                    args[2].as<float>()[i] - 0.5f * direct[1].as<float>()[i]);
  }
}

TEST(GradTest, CallRefusesArgumentsThatDoNotFit) {
  const FunctionBuilder loss = LinearLoss();
  FunctionBuilder step("step");
  const Value x = step.Input(DType::kF32, {8, 3}, Sharding::Replicated());
  step.Call(loss, {x});
  EXPECT_NE(step.status().message().find("takes 4 arguments, got 1"), std::string::npos)
      << step.status().ToString();

  FunctionBuilder other("other");
  const Value y = other.Input(DType::kF32, {8, 3}, Sharding::Replicated());
  const Value labels = other.Input(DType::kI32, {8});
  const Value w = other.Input(DType::kF32, {3, 2}, Sharding::Replicated());
  const Value b = other.Input(DType::kF32, {2}, Sharding::Replicated());
  other.Call(loss, {y, labels, w, b});
  EXPECT_EQ(other.status().code(), Code::kInvalidArgument);
  EXPECT_NE(other.status().message().find(
                "call of 'linear': argument 0 is f32[8,3] split [-1,-1], the input takes f32[8,3] "
                "split [0,-1]"),
            std::string::npos)
      << other.status().ToString();
  EXPECT_FALSE(other.TypeOf(Value{}).ok());
}

}  // namespace
}  // namespace atl
