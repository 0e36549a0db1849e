// The data-parallel MLP example (examples/mlp) on a real cluster: its loss falls, and
// training on 4 devices of two hosts (gradients all-reduced over the data plane) reaches
// the same weights as training the same model on the same data on one device.
#include <cmath>

#include "examples/mlp/mlp.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/example_program.h"
#include "tests/e2e/relative_difference.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using examples::MlpConfig;
using examples::MlpResult;

class MlpExampleTest : public ClusterTest {};

MlpResult Train(Client& client, uint32_t devices, const MlpConfig& config) {
  auto slice = client.CreateSlice(devices, "island0");
  EXPECT_THAT(slice, IsOk());
  if (!slice.ok()) return {};
  auto result = examples::TrainMlp(client, *slice, config);
  EXPECT_THAT(result, IsOk()) << devices << " devices: " << result.status().ToString();
  return result.ok() ? std::move(result).value() : MlpResult{};
}

TEST_F(MlpExampleTest, DataParallelRunMatchesTheSingleDeviceRunAndItsLossFalls) {
  auto client = Connect("mlp");
  ASSERT_NE(client, nullptr);
  MlpConfig config;
  config.batch = 32;
  config.hidden = 16;
  config.steps = 12;
  const MlpResult parallel = Train(*client, 4, config);
  const MlpResult single = Train(*client, 1, config);
  ASSERT_EQ(parallel.losses.size(), 12u);
  ASSERT_EQ(single.losses.size(), 12u);

  // The loss falls: the last steps' mean is well below the first step's.
  const double last = (parallel.losses[9] + parallel.losses[10] + parallel.losses[11]) / 3;
  EXPECT_LT(last, 0.8 * parallel.losses[0]) << "first " << parallel.losses[0] << " last " << last;

  // The same numbers up to float rounding: the 4-device run sums each gradient as four
  // partial sums, the 1-device run in one; over 12 steps that stays near 1e-7 relative.
  constexpr double kTolerance = 1e-5;
  for (size_t s = 0; s < 12; ++s) {
    EXPECT_NEAR(parallel.losses[s], single.losses[s], kTolerance * (1 + single.losses[s]))
        << "step " << s + 1;
  }
  const std::pair<const Tensor*, const Tensor*> params[] = {
      {&parallel.params.w1, &single.params.w1},
      {&parallel.params.b1, &single.params.b1},
      {&parallel.params.w2, &single.params.w2},
      {&parallel.params.b2, &single.params.b2}};
  for (const auto& [p, q] : params) EXPECT_LE(RelativeDifference(*p, *q), kTolerance);
  // And training did move them.
  EXPECT_GT(RelativeDifference(parallel.params.w1, examples::InitMlp(config).w1), 1e-3);
}

TEST_F(MlpExampleTest, ABatchThatDoesNotDivideOverTheDevicesIsRefused) {
  auto client = Connect("mlp-bad");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateSlice(4, "island0");
  ASSERT_THAT(slice, IsOk());
  MlpConfig config;
  config.batch = 30;
  auto result = examples::TrainMlp(*client, *slice, config);
  EXPECT_EQ(result.status().code(), Code::kInvalidArgument) << result.status().ToString();
}

// The example program, run as a user would against this cluster: a line per step and a
// summary.
TEST_F(MlpExampleTest, TheExampleProgramPrintsEachStepAndASummary) {
  ExpectStepsAndSummary(ATOLL_BIN_DIR "/atoll-example-mlp", RmEndpoint(),
                        "batch 64 split over 4 devices of island0");
}

}  // namespace
}  // namespace atl::testing
