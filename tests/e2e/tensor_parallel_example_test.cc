// The tensor-parallel example (examples/tensor_parallel) on a real cluster: on a 2x2 (data x
// model) mesh over both hosts of island0, with every block's all-reduces over the model axis
// and ZeRO-1's reduce-scatters and all-gathers over the data axis, it reaches the weights of
// a one-device run of the same model on the same data, and its loss falls.
#include <algorithm>
#include <iostream>
#include <string>

#include "examples/tensor_parallel/tensor_parallel.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/example_program.h"
#include "tests/e2e/relative_difference.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using examples::TensorParallelConfig;
using examples::TensorParallelResult;

class TensorParallelExampleTest : public ClusterTest {};

TensorParallelResult Train(Client& client, const Shape& mesh, const TensorParallelConfig& config) {
  auto slice = client.CreateMeshSlice(mesh, "island0");
  EXPECT_THAT(slice, IsOk());
  if (!slice.ok()) return {};
  auto result = examples::TrainTensorParallel(client, *slice, config);
  EXPECT_THAT(result, IsOk()) << ShapeString(mesh) << ": " << result.status().ToString();
  return result.ok() ? std::move(result).value() : TensorParallelResult{};
}

TEST_F(TensorParallelExampleTest, TheParallelRunReachesTheOneDeviceRunsWeightsAfterFiveSteps) {
  auto client = Connect("tensor-parallel");
  ASSERT_NE(client, nullptr);
  TensorParallelConfig config;
  config.steps = 5;
  const TensorParallelResult parallel = Train(*client, {2, 2}, config);
  const TensorParallelResult single = Train(*client, {1, 1}, config);
  ASSERT_EQ(parallel.weights.size(), 2u);
  ASSERT_EQ(single.weights.size(), 2u);
  // The same numbers up to float rounding: the parallel run sums each gradient over two
  // halves of the batch and the hidden layer, the single one at once.
  constexpr double kTolerance = 1e-5;
  const auto init = examples::InitBlocks(config);
  double worst = 0;
  for (size_t l = 0; l < 2; ++l) {
    const auto& p = parallel.weights[l];
    const auto& q = single.weights[l];
    const std::pair<const Tensor*, const Tensor*> pairs[] = {
        {&p.w1, &q.w1}, {&p.b1, &q.b1}, {&p.w2, &q.w2}, {&p.b2, &q.b2}};
    for (const auto& [a, b] : pairs) {
      EXPECT_LE(RelativeDifference(*a, *b), kTolerance) << "block " << l;
      worst = std::max(worst, RelativeDifference(*a, *b));
    }
    // And training did move them.
    EXPECT_GT(RelativeDifference(p.w1, init[l].w1), 1e-3) << "block " << l;
    EXPECT_GT(RelativeDifference(p.b2, init[l].b2), 1e-3) << "block " << l;
  }
  for (size_t s = 0; s < 5; ++s) {
    EXPECT_NEAR(parallel.losses[s], single.losses[s], kTolerance * (1 + single.losses[s]))
        << "step " << s + 1;
  }
  std::cout << "the weights differ by " << worst << " relative at most\n";
  RecordProperty("worst_relative_difference", std::to_string(worst));
}

TEST_F(TensorParallelExampleTest, ItsLossFalls) {
  auto client = Connect("tensor-parallel-loss");
  ASSERT_NE(client, nullptr);
  TensorParallelConfig config;
  config.steps = 20;
  const TensorParallelResult parallel = Train(*client, {2, 2}, config);
  ASSERT_EQ(parallel.losses.size(), 20u);
  const double last = (parallel.losses[17] + parallel.losses[18] + parallel.losses[19]) / 3;
  EXPECT_LT(last, 0.8 * parallel.losses[0]) << "first " << parallel.losses[0] << " last " << last;
}

TEST_F(TensorParallelExampleTest, SizesThatDoNotDivideOverTheirAxesAreRefused) {
  auto client = Connect("tensor-parallel-bad");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateMeshSlice({2, 2}, "island0");
  ASSERT_THAT(slice, IsOk());
  TensorParallelConfig config;
  config.hidden = 63;
  auto result = examples::TrainTensorParallel(*client, *slice, config);
  EXPECT_EQ(result.status().code(), Code::kInvalidArgument) << result.status().ToString();
  auto flat = client->CreateSlice(2, "island0");
  ASSERT_THAT(flat, IsOk());
  result = examples::TrainTensorParallel(*client, *flat, TensorParallelConfig{});
  EXPECT_EQ(result.status().code(), Code::kInvalidArgument) << result.status().ToString();
}

// The example program, run as a user would against this cluster.
TEST_F(TensorParallelExampleTest, TheExampleProgramPrintsEachStepAndASummary) {
  ExpectStepsAndSummary(ATOLL_BIN_DIR "/atoll-example-tensor-parallel", RmEndpoint(),
                        "on a 2x2 (data x model) mesh of island0");
}

}  // namespace
}  // namespace atl::testing
