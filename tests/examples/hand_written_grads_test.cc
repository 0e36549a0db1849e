// The examples' backward passes come from Grad (include/atoll/grad.h). Before, each was
// written by hand; those hand-written passes live on here as references: on the same random
// inputs, on one device and on shards, Grad's gradients equal them within 1e-6 relative.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "atoll/grad.h"
#include "client/internal.h"
#include "examples/mlp/mlp.h"
#include "examples/moe/moe.h"
#include "examples/pipeline/model.h"
#include "tests/compute/shard_runner.h"
#include "tests/kernels/test_tensors.h"

namespace atl {
namespace {

constexpr double kTolerance = 1e-6;

const ir::FunctionDef& Def(const FunctionBuilder& b) { return HandleAccess::ImplOf(b).def; }

// Every element of `got` within kTolerance * (1 + |want|) of `want`.
void ExpectSame(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double w = want.as<float>()[i];
    ASSERT_LE(std::abs(got.as<float>()[i] - w), kTolerance * (1 + std::abs(w)))
        << what << " element " << i;
  }
}

void ExpectSameOutputs(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t o = 0; o < want.size(); ++o)
    ExpectSame(got[o], want[o], what + " output " + std::to_string(o));
}

// examples/mlp's step as it was written by hand: the loss and the gradients of w1, b1, w2,
// b2, each device's share all-reduced.
FunctionBuilder HandWrittenMlpGradients(const examples::MlpConfig& c) {
  FunctionBuilder b("mlp_hand_written");
  const auto [x, labels, w1, b1, w2, b2] = examples::DeclareMlpInputs(b, c);
  const Value z1 = b.BiasAdd(b.Matmul(x, w1), b1);
  const Value h = b.Gelu(z1);
  const auto ce = b.CrossEntropy(b.BiasAdd(b.Matmul(h, w2), b2), labels);
  const Value dw2 = b.Matmul(h, ce.dlogits, true, false);
  const Value db2 = b.ReduceSum(ce.dlogits, 0);
  const Value dz1 = b.GeluBackward(b.Matmul(ce.dlogits, w2, false, true), z1);
  const Value dw1 = b.Matmul(x, dz1, true, false);
  const Value db1 = b.ReduceSum(dz1, 0);
  for (Value v : {ce.loss, dw1, db1, dw2, db2}) b.Output(b.AllReduceSum(v));
  return b;
}

TEST(HandWrittenGradsTest, MlpGradientsEqualTheHandWrittenOnesOnOneAndFourDevices) {
  examples::MlpConfig c;
  c.batch = 16;
  ATOLL_ASSERT_OK_AND_ASSIGN(const FunctionBuilder grad, examples::MlpGradients(c));
  const FunctionBuilder hand = HandWrittenMlpGradients(c);
  const examples::MlpParams p = examples::InitMlp(c);
  std::mt19937 rng(3);
  const examples::MlpBatch batch = examples::MakeMlpBatch(c, 1);
  const std::vector<Tensor> args = {batch.x, batch.labels,
                                    p.w1,    testutil::RandomF32(rng, {c.hidden}, -0.1f, 0.1f),
                                    p.w2,    testutil::RandomF32(rng, {c.classes}, -0.1f, 0.1f)};
  for (int shards : {1, 4}) {
    ATOLL_ASSERT_OK_AND_ASSIGN(const auto got, testutil::RunGlobal(Def(grad), shards, args));
    ATOLL_ASSERT_OK_AND_ASSIGN(const auto want, testutil::RunGlobal(Def(hand), shards, args));
    ExpectSameOutputs(got, want, "mlp on " + std::to_string(shards));
  }
}

// examples/pipeline's block backward and head as written by hand: (x, dy, w1, w2) -> dx,
// dw1, dw2 (all-reduced over split rows), and (y, labels) -> the loss's gradient.
FunctionBuilder HandWrittenBlockBackward(const examples::PipelineConfig& c,
                                         const examples::BlockLayout& layout) {
  const Sharding rows = layout.split_rows ? Sharding::Split(0) : Sharding::Replicated();
  FunctionBuilder b("block_backward_hand_written");
  const Value x = b.Input(DType::kF32, {layout.rows, c.width}, rows);
  const Value dy = b.Input(DType::kF32, {layout.rows, c.width}, rows);
  const Value w1 = b.Input(DType::kF32, {c.width, c.hidden}, Sharding::Replicated());
  const Value w2 = b.Input(DType::kF32, {c.hidden, c.width}, Sharding::Replicated());
  const Value z = b.Matmul(x, w1);
  const Value dz = b.GeluBackward(b.Matmul(dy, w2, false, true), z);
  Value dw1 = b.Matmul(x, dz, true, false);
  Value dw2 = b.Matmul(b.Gelu(z), dy, true, false);
  if (layout.split_rows) {
    dw1 = b.AllReduceSum(dw1);
    dw2 = b.AllReduceSum(dw2);
  }
  b.Output(b.Add(dy, b.Matmul(dz, w1, false, true)));
  b.Output(dw1);
  b.Output(dw2);
  return b;
}

TEST(HandWrittenGradsTest, PipelineBlockAndHeadGradientsEqualTheHandWrittenOnes) {
  examples::PipelineConfig c;
  std::mt19937 rng(4);
  for (bool split : {false, true}) {
    examples::BlockLayout layout;
    layout.rows = 16;
    layout.split_rows = split;
    layout.loss_scale = split ? 1.0 : 1.0 / 3;
    const int shards = split ? 4 : 1;
    const std::string what = split ? "data parallel" : "stage";
    const Tensor x = testutil::RandomF32(rng, {layout.rows, c.width}, -1, 1);
    const Tensor dy = testutil::RandomF32(rng, {layout.rows, c.width}, -1, 1);
    const Tensor w1 = testutil::RandomF32(rng, {c.width, c.hidden}, -0.3f, 0.3f);
    const Tensor w2 = testutil::RandomF32(rng, {c.hidden, c.width}, -0.3f, 0.3f);
    ATOLL_ASSERT_OK_AND_ASSIGN(const FunctionBuilder backward,
                               examples::BlockBackward(c, layout, false));
    ATOLL_ASSERT_OK_AND_ASSIGN(const auto got,
                               testutil::RunGlobal(Def(backward), shards, {x, w1, w2, dy}));
    ATOLL_ASSERT_OK_AND_ASSIGN(
        const auto want,
        testutil::RunGlobal(Def(HandWrittenBlockBackward(c, layout)), shards, {x, dy, w1, w2}));
    ExpectSameOutputs(got, want, "block, " + what);

    // The head: its dy is the scaled loss's gradient, the hand-written dlogits scaled.
    FunctionBuilder hand("head_hand_written");
    const Sharding rows = split ? Sharding::Split(0) : Sharding::Replicated();
    const Value y = hand.Input(DType::kF32, {layout.rows, c.width}, rows);
    const Value labels = hand.Input(DType::kI32, {layout.rows}, rows);
    hand.Output(hand.CrossEntropy(y, labels).dlogits);
    ATOLL_ASSERT_OK_AND_ASSIGN(const FunctionBuilder head, examples::Head(c, layout, false));
    const std::vector<Tensor> head_args = {x, testutil::RandomI32(rng, {layout.rows}, 0, 15)};
    ATOLL_ASSERT_OK_AND_ASSIGN(const auto head_got,
                               testutil::RunGlobal(Def(head), shards, head_args));
    ATOLL_ASSERT_OK_AND_ASSIGN(const auto head_want,
                               testutil::RunGlobal(Def(hand), shards, head_args));
    Tensor scaled = head_want[0];
    for (float& v : scaled.as<float>()) v = static_cast<float>(v * layout.loss_scale);
    ExpectSame(head_got[1], scaled, "head, " + what);
  }
}

// examples/moe's expert backward as written by hand: (x_j..., w1, w2, dy_j...) -> dw1, dw2,
// each expert's weight gradients over its own routed rows.
FunctionBuilder HandWrittenExpertGradients(const examples::MoeConfig& c) {
  FunctionBuilder b("moe_experts_hand_written");
  std::vector<Value> x, dy;
  for (int j = 0; j < c.top_k; ++j) x.push_back(b.Input(DType::kF32, {kDynamicDim, c.width}));
  const Value w1 = b.Input(DType::kF32, {c.experts, c.width, c.hidden});
  const Value w2 = b.Input(DType::kF32, {c.experts, c.hidden, c.width});
  for (int j = 0; j < c.top_k; ++j) dy.push_back(b.Input(DType::kF32, {kDynamicDim, c.width}));
  Value dw1, dw2;
  for (int j = 0; j < c.top_k; ++j) {
    const Value hidden = b.GroupedMatmul(x[j], w1);
    const Value dw2_j = b.GroupedWeightGrad(b.Gelu(hidden), dy[j], c.experts);
    const Value dhidden = b.GeluBackward(b.GroupedMatmul(dy[j], w2, true), hidden);
    const Value dw1_j = b.GroupedWeightGrad(x[j], dhidden, c.experts);
    dw1 = j == 0 ? dw1_j : b.Add(dw1, dw1_j);
    dw2 = j == 0 ? dw2_j : b.Add(dw2, dw2_j);
  }
  b.Output(dw1);
  b.Output(dw2);
  return b;
}

TEST(HandWrittenGradsTest, MoeExpertGradientsEqualTheHandWrittenOnesOnRoutedRows) {
  examples::MoeConfig c;
  ATOLL_ASSERT_OK_AND_ASSIGN(const FunctionBuilder grad, examples::MoeExpertGradients(c));
  const FunctionBuilder hand = HandWrittenExpertGradients(c);
  const examples::MoeParams p = examples::InitMoe(c);
  // Each expert's rows of each choice, as routing leaves them: some none.
  std::mt19937 rng(5);
  std::vector<std::vector<Tensor>> inputs(c.experts);
  for (int e = 0; e < c.experts; ++e) {
    std::vector<Tensor> x, dy;
    for (int j = 0; j < c.top_k; ++j) {
      const int64_t rows = (e + j) % 3 == 0 ? 0 : 2 + e + j;
      x.push_back(testutil::RandomF32(rng, {rows, c.width}, -1, 1));
      dy.push_back(testutil::RandomF32(rng, {rows, c.width}, -1, 1));
    }
    inputs[e] = x;
    inputs[e].push_back(testutil::ShardOf(p.w1, 0, e, c.experts));
    inputs[e].push_back(testutil::ShardOf(p.w2, 0, e, c.experts));
    inputs[e].insert(inputs[e].end(), dy.begin(), dy.end());
  }
  ATOLL_ASSERT_OK_AND_ASSIGN(const auto got, testutil::RunOnShards(Def(grad), inputs));
  ATOLL_ASSERT_OK_AND_ASSIGN(const auto want, testutil::RunOnShards(Def(hand), inputs));
  for (int e = 0; e < c.experts; ++e)
    ExpectSameOutputs(got[e], want[e], "expert " + std::to_string(e));
}

// examples/moe's combine as written by hand gave each choice's rows (in token order) the
// gradient dout * gate_j; Grad of MoeLoss gives that, and the gate weights' gradient
// sum_i dout y_j, which the hand-written step did not train.
TEST(HandWrittenGradsTest, MoeLossGradientsEqualTheHandWrittenOnes) {
  examples::MoeConfig c;
  c.tokens = 8;
  std::vector<int> wrt(c.top_k + 1);
  for (int i = 0; i <= c.top_k; ++i) wrt[i] = i;
  ATOLL_ASSERT_OK_AND_ASSIGN(const FunctionBuilder grad, ValueAndGrad(examples::MoeLoss(c), wrt));
  std::mt19937 rng(6);
  std::vector<Tensor> args;
  for (int j = 0; j < c.top_k; ++j)
    args.push_back(testutil::RandomF32(rng, {c.tokens, c.width}, -1, 1));
  const Tensor weights = testutil::RandomF32(rng, {c.tokens, c.top_k}, 0, 1);
  const Tensor target = testutil::RandomF32(rng, {c.tokens, c.width}, -1, 1);
  args.push_back(weights);
  args.push_back(target);
  ATOLL_ASSERT_OK_AND_ASSIGN(const auto got, testutil::RunGlobal(Def(grad), 1, args));
  ASSERT_EQ(got.size(), 2u + c.top_k + 1);

  const double elements = static_cast<double>(c.tokens * c.width);
  const auto w = weights.as<float>();
  std::vector<Tensor> dy(c.top_k, Tensor(DType::kF32, {c.tokens, c.width}));
  Tensor dweights(DType::kF32, {c.tokens, c.top_k});
  for (int64_t t = 0; t < c.tokens; ++t) {
    for (int64_t i = 0; i < c.width; ++i) {
      double out = 0;
      for (int j = 0; j < c.top_k; ++j)
        out += w[t * c.top_k + j] * args[j].as<float>()[t * c.width + i];
      const double dout = 2 * (out - target.as<float>()[t * c.width + i]) / elements;
      for (int j = 0; j < c.top_k; ++j) {
        dy[j].as<float>()[t * c.width + i] = static_cast<float>(dout * w[t * c.top_k + j]);
        dweights.as<float>()[t * c.top_k + j] +=
            static_cast<float>(dout * args[j].as<float>()[t * c.width + i]);
      }
    }
  }
  for (int j = 0; j < c.top_k; ++j) ExpectSame(got[2 + j], dy[j], "choice " + std::to_string(j));
  ExpectSame(got[2 + c.top_k], dweights, "gate weights");
}

}  // namespace
}  // namespace atl
