// The pipelined example (examples/pipeline) on a real cluster: 8 stages with GPipe
// micro-batches, on one device, on four devices of one island and over two islands (4 + 4
// stages joined by DCN transfers) reach the same weights, and the loss falls.
#include <cmath>
#include <string>

#include "examples/pipeline/pipeline.h"
#include "tests/e2e/cluster_fixture.h"

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
    EXPECT_TRUE(slice.ok()) << slice.status().ToString();
    if (!slice.ok()) return {};
    slices.push_back(*slice);
  }
  auto result = examples::TrainPipeline(client, slices, config);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? std::move(result).value() : PipelineResult{};
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
    ASSERT_EQ(run->params.size(), single.params.size());
    for (size_t i = 0; i < single.params.size(); ++i) {
      ASSERT_EQ(run->params[i].shape(), single.params[i].shape());
      for (int64_t e = 0; e < single.params[i].num_elements(); ++e) {
        const double want = single.params[i].as<float>()[e];
        ASSERT_NEAR(run->params[i].as<float>()[e], want, kTolerance * (1 + std::abs(want)))
            << "parameter " << i << " element " << e;
      }
    }
    for (size_t s = 0; s < single.losses.size(); ++s) {
      EXPECT_NEAR(run->losses[s], single.losses[s], kTolerance * (1 + single.losses[s]));
    }
  }
}

}  // namespace
}  // namespace atl::testing
