// The MLP example in mixed precision (examples/mlp, precision bf16): bf16 matmuls with f32
// master weights train as the f32 model does, on the same data and steps, to within 2% of its
// final loss; and the bf16 run is a different computation (its losses are not f32's). A bf16
// run's checkpoint resumes it exactly.
#include <cmath>
#include <vector>

#include "examples/mlp/mlp.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/relative_difference.h"
#include "tests/launcher/subprocess.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using examples::MlpConfig;
using examples::MlpResult;

class MlpMixedPrecisionTest : public ClusterTest {};

MlpResult Train(Client& client, const MlpConfig& config) {
  auto slice = client.CreateSlice(4, "island0");
  EXPECT_THAT(slice, IsOk());
  if (!slice.ok()) return {};
  auto result = examples::TrainMlp(client, *slice, config);
  EXPECT_THAT(result, IsOk()) << DTypeName(config.precision) << ": " << result.status().ToString();
  return result.ok() ? std::move(result).value() : MlpResult{};
}

// The tolerance the README states for the example's defaults (30 steps of 64 examples).
constexpr double kFinalLossTolerance = 0.02;

TEST_F(MlpMixedPrecisionTest, BF16FinalLossIsWithinTwoPercentOfF32s) {
  auto client = Connect("mlp-bf16");
  ASSERT_NE(client, nullptr);
  MlpConfig f32;
  MlpConfig bf16 = f32;
  bf16.precision = DType::kBF16;
  const MlpResult full = Train(*client, f32);
  const MlpResult mixed = Train(*client, bf16);
  ASSERT_EQ(full.losses.size(), static_cast<size_t>(f32.steps));
  ASSERT_EQ(mixed.losses.size(), static_cast<size_t>(f32.steps));

  const double want = full.losses.back(), got = mixed.losses.back();
  EXPECT_LE(std::abs(got - want), kFinalLossTolerance * want) << "f32 " << want << " bf16 " << got;
  // Both trained: the final loss is well below the first.
  EXPECT_LT(got, 0.5 * mixed.losses.front());
  // The bf16 matmuls did round: the curves are close, not equal.
  EXPECT_NE(mixed.losses, full.losses);
  EXPECT_GT(RelativeDifference(mixed.params.w1, full.params.w1), 0);
  // The master weights stay f32.
  for (const Tensor* w : {&mixed.params.w1, &mixed.params.b1, &mixed.params.w2, &mixed.params.b2}) {
    EXPECT_EQ(w->dtype(), DType::kF32);
  }
}

// A bf16 run's checkpoint (its f32 master weights, the step and the precision) resumes to the
// losses and weights of a run that was never stopped, exactly; in f32 it is refused.
TEST_F(MlpMixedPrecisionTest, BF16TrainingResumesFromACheckpointWithTheSameLosses) {
  auto client = Connect("mlp-bf16-resume");
  ASSERT_NE(client, nullptr);
  MlpConfig saved;
  saved.precision = DType::kBF16;
  saved.steps = 3;
  saved.checkpoint = "mlp-bf16/run";
  saved.checkpoint_every = 3;
  const MlpResult first = Train(*client, saved);
  ASSERT_EQ(first.losses.size(), 3u);

  MlpConfig resume = saved;
  resume.resume = true;
  resume.steps = 8;
  const MlpResult resumed = Train(*client, resume);
  ASSERT_EQ(resumed.first_step, 4);
  ASSERT_EQ(resumed.losses.size(), 5u);

  MlpConfig uninterrupted = resume;
  uninterrupted.resume = false;
  uninterrupted.checkpoint = "";
  const MlpResult reference = Train(*client, uninterrupted);
  ASSERT_EQ(reference.losses.size(), 8u);
  EXPECT_EQ(resumed.losses,
            std::vector<double>(reference.losses.begin() + 3, reference.losses.end()));
  EXPECT_EQ(resumed.params.w1, reference.params.w1);
  EXPECT_EQ(resumed.params.b2, reference.params.b2);
  EXPECT_EQ(resumed.params.w1.dtype(), DType::kF32);

  MlpConfig in_f32 = resume;
  in_f32.precision = DType::kF32;
  auto slice = client->CreateSlice(4, "island0");
  ASSERT_THAT(slice, IsOk());
  auto refused = examples::TrainMlp(*client, *slice, in_f32);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument) << refused.status().ToString();
  EXPECT_NE(
      refused.status().message().find("in precision bf16; resume it in that precision, not f32"),
      std::string::npos)
      << refused.status().ToString();
}

TEST_F(MlpMixedPrecisionTest, TheExampleProgramTakesThePrecision) {
  Subprocess example({ATOLL_BIN_DIR "/atoll-example-mlp", "--rm", RmEndpoint(), "--steps", "2",
                      "--precision", "bf16"});
  const CommandResult done = example.Wait(std::chrono::seconds(60));
  ASSERT_EQ(done.exit_code, 0) << done.Describe();
  EXPECT_NE(done.out.find("bf16 matmuls with f32 master weights"), std::string::npos) << done.out;
  Subprocess bad({ATOLL_BIN_DIR "/atoll-example-mlp", "--rm", RmEndpoint(), "--precision", "f8"});
  const CommandResult refused = bad.Wait(std::chrono::seconds(60));
  EXPECT_NE(refused.exit_code, 0) << refused.Describe();
}

}  // namespace
}  // namespace atl::testing
