// The pipelined example (examples/pipeline) on a real cluster: 8 stages with GPipe
// micro-batches, on one device, on four devices of one island and over two islands (4 + 4
// stages joined by DCN transfers) reach the same weights, and the loss falls; the same model
// trained data-parallel (the pipeline benchmark's baseline) reaches them too.
#include <cmath>
#include <string>

#include "examples/pipeline/data_parallel.h"
#include "examples/pipeline/pipeline.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/relative_difference.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using examples::PipelineConfig;
using examples::PipelineResult;

class PipelineExampleTest : public ClusterTest {};

// Stage s on its own 1-device slice of island0 (first half) or `second_island`; or every
// stage on one slice when `one_device`.
PipelineResult Train(Client& client, const PipelineConfig& config, bool one_device,
                     const std::string& second_island) {
  std::vector<Slice> slices;
  for (int s = 0; s < config.stages; ++s) {
    if (one_device && s > 0) {
      slices.push_back(slices[0]);
      continue;
    }
    auto slice = client.CreateSlice(1, s < config.stages / 2 ? "island0" : second_island);
    EXPECT_THAT(slice, IsOk());
    if (!slice.ok()) return {};
    slices.push_back(*slice);
  }
  auto result = examples::TrainPipeline(client, slices, config);
  EXPECT_THAT(result, IsOk());
  return result.ok() ? std::move(result).value() : PipelineResult{};
}

// Every parameter of `run` within `tolerance` (relative) of `want`'s.
void ExpectSameWeights(const PipelineResult& run, const PipelineResult& want, double tolerance) {
  ASSERT_EQ(run.params.size(), want.params.size());
  for (size_t i = 0; i < want.params.size(); ++i) {
    EXPECT_LE(RelativeDifference(run.params[i], want.params[i]), tolerance) << "parameter " << i;
  }
}

TEST_F(PipelineExampleTest, OneDeviceOneIslandAndTwoIslandsReachTheSameWeights) {
  auto client = Connect("pipeline");
  ASSERT_NE(client, nullptr);
  PipelineConfig config;
  config.stages = 8;
  config.micro_batches = 3;
  config.steps = 4;
  const PipelineResult single = Train(*client, config, true, "island0");
  const PipelineResult one_island = Train(*client, config, false, "island0");
  const PipelineResult two_islands = Train(*client, config, false, "island1");
  ASSERT_EQ(single.losses.size(), 4u);
  EXPECT_LT(single.losses.back(), single.losses.front());
  // Every stage does the same float operations wherever it runs, so only a transfer that
  // changed bytes could make a difference; the tolerance allows for none beyond rounding.
  constexpr double kTolerance = 1e-6;
  for (const PipelineResult* run : {&one_island, &two_islands}) {
    ExpectSameWeights(*run, single, kTolerance);
    ASSERT_EQ(run->losses.size(), single.losses.size());
    for (size_t s = 0; s < single.losses.size(); ++s) {
      EXPECT_NEAR(run->losses[s], single.losses[s], kTolerance * (1 + single.losses[s]));
    }
  }
}

TEST_F(PipelineExampleTest, DataParallelReachesThePipelinesWeights) {
  auto client = Connect("pipeline-data-parallel");
  ASSERT_NE(client, nullptr);
  PipelineConfig config;
  config.stages = 8;
  config.micro_batches = 4;
  config.steps = 3;
  const PipelineResult pipeline = Train(*client, config, true, "island0");
  auto slice = client->CreateSlice(4, "island0");  // on two hosts
  ASSERT_THAT(slice, IsOk());
  auto data_parallel = examples::TrainDataParallel(*client, *slice, config);
  ASSERT_THAT(data_parallel, IsOk());
  ASSERT_EQ(data_parallel->losses.size(), 3u);
  EXPECT_LT(data_parallel->losses.back(), data_parallel->losses.front());
  // The same sums in another order (per device, then all-reduced): rounding differs.
  ExpectSameWeights(*data_parallel, pipeline, 1e-5);
}

}  // namespace
}  // namespace atl::testing
