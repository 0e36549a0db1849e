// The mixture-of-experts example (examples/moe) on a real cluster: a top-k gate computed on
// the devices routes tokens to one expert per device, through each expert's own weights and
// back. On every step (fresh random tokens, with Adam-updated experts and gate kept in the
// object stores), the devices' gate chooses the experts the client's gate chooses from the
// same weights, and the layer's output equals the dense reference computed on the client;
// experts that get no rows work; the loss falls; and the experts' and the gate's weights
// after a few steps equal a double-precision training on the client.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "examples/moe/moe.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/relative_difference.h"
#include "tests/launcher/subprocess.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using examples::MoeConfig;
using examples::MoeStep;

class MoeExampleTest : public ClusterTest {};

// Trains `config` on island0, checking every step's output against DenseMoe; returns the
// losses and counts the steps on which some expert got no rows.
std::vector<double> TrainChecked(Client& client, const MoeConfig& config, int* steps_with_idle) {
  // float32 sums in a different order (OpenBLAS, per expert) against double on the
  // client: measured ~1e-7 relative.
  constexpr double kTolerance = 1e-5;
  auto result = examples::TrainMoe(client, "island0", config, [&](const MoeStep& step) {
    // The devices score in float32, the client in double: the same choices unless two
    // experts tie within float rounding, which these seeds do not hit.
    const examples::GateChoices gate =
        examples::ChooseExperts(step.params->gate, step.batch->x, config.top_k);
    ASSERT_EQ(step.choices.size(), gate.experts.size());
    for (size_t j = 0; j < step.choices.size(); ++j) {
      EXPECT_EQ(step.choices[j], gate.experts[j]) << "step " << step.step << " choice " << j;
    }
    const Tensor want = examples::DenseMoe(*step.params, step.batch->x, config.top_k);
    EXPECT_LE(RelativeDifference(*step.output, want), kTolerance) << "step " << step.step;
    if (std::count(step.routed.begin(), step.routed.end(), 0) > 0) ++*steps_with_idle;
  });
  EXPECT_THAT(result, IsOk());
  return result.ok() ? result->losses : std::vector<double>{};
}

// The example's training on the client, in double: the gate's top k of x wg and the
// softmax of their scores, every token through its k experts, the mean squared error's
// gradient back through the experts and through the softmax to the gate, and Adam
// (kernels/optim.h's formula, the example's hyper-parameters: the builder's defaults but for
// the learning rate) on w1, w2 and wg.
class ReferenceMoe {
 public:
  explicit ReferenceMoe(const MoeConfig& c) : c_(c) {
    const examples::MoeParams init = examples::InitMoe(c);
    for (int p = 0; p < kParams; ++p) {
      const Tensor& w = p == kW1 ? init.w1 : p == kW2 ? init.w2 : init.gate;
      param_[p].assign(w.as<float>().begin(), w.as<float>().end());
      m_[p].assign(param_[p].size(), 0.0);
      v_[p].assign(param_[p].size(), 0.0);
    }
  }

  void Step(const examples::MoeBatch& batch, int step) {
    const int64_t d = c_.width, hid = c_.hidden, n = c_.experts;
    const int k = c_.top_k;
    const auto x = batch.x.as<float>();
    std::vector<double> grad[kParams];
    for (int p = 0; p < kParams; ++p) grad[p].assign(param_[p].size(), 0.0);
    std::vector<double> scores(n), gate(k), out(d), dout(d), dgate(k);
    std::vector<std::vector<double>> h(k, std::vector<double>(hid)), a = h,
                                                                     y(k, std::vector<double>(d));
    std::vector<int> expert(k);
    for (int64_t t = 0; t < c_.tokens; ++t) {
      // The gate: top k of the scores (lower index first among equals), their softmax.
      for (int64_t e = 0; e < n; ++e) {
        scores[e] = 0;
        for (int64_t i = 0; i < d; ++i) scores[e] += x[t * d + i] * param_[kGate][i * n + e];
      }
      std::vector<int> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int p, int q) { return scores[p] > scores[q]; });
      double sum = 0;
      for (int j = 0; j < k; ++j) {
        expert[j] = order[j];
        gate[j] = std::exp(scores[expert[j]] - scores[expert[0]]);
        sum += gate[j];
      }
      for (double& g : gate) g /= sum;
      // The experts, and the output.
      std::fill(out.begin(), out.end(), 0.0);
      for (int j = 0; j < k; ++j) {
        const double* w1 = &param_[kW1][expert[j] * d * hid];
        const double* w2 = &param_[kW2][expert[j] * hid * d];
        for (int64_t q = 0; q < hid; ++q) {
          h[j][q] = 0;
          for (int64_t i = 0; i < d; ++i) h[j][q] += x[t * d + i] * w1[i * hid + q];
          a[j][q] =
              0.5 * h[j][q] * (1 + std::tanh(kC * (h[j][q] + kA * h[j][q] * h[j][q] * h[j][q])));
        }
        for (int64_t i = 0; i < d; ++i) {
          y[j][i] = 0;
          for (int64_t q = 0; q < hid; ++q) y[j][i] += a[j][q] * w2[q * d + i];
          out[i] += gate[j] * y[j][i];
        }
      }
      // Back through the experts, and to each gate weight.
      for (int64_t i = 0; i < d; ++i) {
        dout[i] =
            2 * (out[i] - batch.target.as<float>()[t * d + i]) / static_cast<double>(c_.tokens * d);
      }
      for (int j = 0; j < k; ++j) {
        const int64_t e = expert[j];
        const double* w2 = &param_[kW2][e * hid * d];
        dgate[j] = 0;
        for (int64_t i = 0; i < d; ++i) dgate[j] += dout[i] * y[j][i];
        for (int64_t q = 0; q < hid; ++q) {
          double da = 0;
          for (int64_t i = 0; i < d; ++i) {
            const double dy = gate[j] * dout[i];
            grad[kW2][(e * hid + q) * d + i] += a[j][q] * dy;
            da += w2[q * d + i] * dy;
          }
          const double hq = h[j][q];
          const double th = std::tanh(kC * (hq + kA * hq * hq * hq));
          const double dh =
              da * (0.5 * (1 + th) + 0.5 * hq * (1 - th * th) * kC * (1 + 3 * kA * hq * hq));
          for (int64_t i = 0; i < d; ++i) grad[kW1][(e * d + i) * hid + q] += x[t * d + i] * dh;
        }
      }
      // Back through the softmax of the k scores to wg.
      double dot = 0;
      for (int j = 0; j < k; ++j) dot += gate[j] * dgate[j];
      for (int j = 0; j < k; ++j) {
        const double dscore = gate[j] * (dgate[j] - dot);
        for (int64_t i = 0; i < d; ++i) grad[kGate][i * n + expert[j]] += x[t * d + i] * dscore;
      }
    }
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (int p = 0; p < kParams; ++p) {
      for (size_t i = 0; i < param_[p].size(); ++i) {
        m_[p][i] = b1 * m_[p][i] + (1 - b1) * grad[p][i];
        v_[p][i] = b2 * v_[p][i] + (1 - b2) * grad[p][i] * grad[p][i];
        param_[p][i] -= c_.learning_rate * (m_[p][i] / (1 - std::pow(b1, step))) /
                        (std::sqrt(v_[p][i] / (1 - std::pow(b2, step))) + eps);
      }
    }
  }

  // The largest |got - want| / (1 + |want|) of the trained weights.
  double Difference(const examples::MoeParams& got) const {
    double worst = 0;
    for (int p = 0; p < kParams; ++p) {
      const Tensor& t = p == kW1 ? got.w1 : p == kW2 ? got.w2 : got.gate;
      for (size_t i = 0; i < param_[p].size(); ++i) {
        worst = std::max(worst,
                         std::abs(t.as<float>()[i] - param_[p][i]) / (1 + std::abs(param_[p][i])));
      }
    }
    return worst;
  }

 private:
  enum Param { kW1, kW2, kGate, kParams };
  static constexpr double kC = 0.7978845608028654;  // sqrt(2 / pi), GELU's tanh form
  static constexpr double kA = 0.044715;
  MoeConfig c_;
  std::vector<double> param_[kParams], m_[kParams], v_[kParams];
};

TEST_F(MoeExampleTest, OutputsEqualTheDenseReferenceAndTheLossFalls) {
  auto client = Connect("moe");
  ASSERT_NE(client, nullptr);
  MoeConfig config;
  config.tokens = 32;
  config.width = 8;
  config.hidden = 8;
  config.steps = 20;
  config.learning_rate = 0.03;
  int idle = 0;
  const std::vector<double> losses = TrainChecked(*client, config, &idle);
  ASSERT_EQ(losses.size(), 20u);
  // Each step's batch is new, so single losses are noisy: compare the first and last three.
  const double first = (losses[0] + losses[1] + losses[2]) / 3;
  const double last = (losses[17] + losses[18] + losses[19]) / 3;
  EXPECT_LT(last, 0.7 * first) << "first " << first << " last " << last;
}

// The weights after a few steps equal the client's double-precision training: the routed
// backward pass that Grad made, through the experts and through the gate's softmax and top k
// to wg, and Adam as IR ops compute what the formulas say.
TEST_F(MoeExampleTest, TrainedWeightsEqualAReferenceTrainedOnTheClient) {
  auto client = Connect("moe-weights");
  ASSERT_NE(client, nullptr);
  MoeConfig config;
  config.tokens = 16;
  config.width = 8;
  config.hidden = 8;
  config.steps = 4;
  auto result = examples::TrainMoe(*client, "island0", config);
  ASSERT_THAT(result, IsOk());
  ReferenceMoe reference(config);
  for (int s = 1; s <= config.steps; ++s) reference.Step(examples::MakeMoeBatch(config, s), s);
  // Adam's step is about lr * sign(gradient) early on, so float rounding in the gradients
  // barely moves it: measured ~1e-7.
  constexpr double kTolerance = 1e-4;
  EXPECT_LE(reference.Difference(result->params), kTolerance);
  // And training did move them, by about steps * lr: the experts and the gate.
  const examples::MoeParams init = examples::InitMoe(config);
  EXPECT_GT(RelativeDifference(result->params.w1, init.w1), 1e-2);
  EXPECT_GT(RelativeDifference(result->params.gate, init.gate), 1e-2);
}

// Three tokens, one expert each, four experts: on every step at least one expert gets no
// rows, and its shard still runs, sends back nothing and takes its (zero-gradient) step.
TEST_F(MoeExampleTest, ExpertsThatGetNoRowsWork) {
  auto client = Connect("moe-idle");
  ASSERT_NE(client, nullptr);
  MoeConfig config;
  config.tokens = 3;
  config.width = 4;
  config.hidden = 4;
  config.top_k = 1;
  config.steps = 4;
  int idle = 0;
  EXPECT_EQ(TrainChecked(*client, config, &idle).size(), 4u);
  EXPECT_EQ(idle, 4);
}

TEST_F(MoeExampleTest, ABadConfigIsRefused) {
  auto client = Connect("moe-bad");
  ASSERT_NE(client, nullptr);
  MoeConfig config;
  config.top_k = config.experts + 1;
  auto result = examples::TrainMoe(*client, "island0", config);
  EXPECT_EQ(result.status().code(), Code::kInvalidArgument) << result.status().ToString();
}

// The example program, run as a user would against this cluster.
TEST_F(MoeExampleTest, TheExampleProgramPrintsEachStepAndASummary) {
  Subprocess example({ATOLL_BIN_DIR "/atoll-example-moe", "--rm", RmEndpoint(), "--steps", "2"});
  const CommandResult done = example.Wait(std::chrono::seconds(60));
  ASSERT_EQ(done.exit_code, 0) << done.Describe();
  for (const char* line : {"MoE of 4 experts", "step   1/2  loss ", "step   2/2  loss ",
                           "rows per expert ", "tokens/s\n", "done: loss "}) {
    EXPECT_NE(done.out.find(line), std::string::npos) << line << " in:\n" << done.out;
  }
}

}  // namespace
}  // namespace atl::testing
