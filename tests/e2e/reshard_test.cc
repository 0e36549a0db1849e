// Edges between different layouts, end to end: a chain over a 2x2 mesh on one island, then
// 2 and 4 devices of the other island, each with its own sharding, so that every edge is a
// resharding transfer and two cross islands. Its result must equal the same chain run on a
// single device.
#include <random>

#include <fmt/format.h>

#include "tests/e2e/cluster_fixture.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kRows = 8;
constexpr int64_t kCols = 4;

struct Stage {
  Shape mesh;
  std::string island;
  Sharding sharding;
};

// x -> x*2+1 -> x*x -> x-3, each step a function on its own stage's slice.
Result<Program> Chain(Client& client, const std::vector<Stage>& stages) {
  ProgramBuilder p;
  Traced x = p.Arg(DType::kF32, {kRows, kCols});
  for (size_t i = 0; i < stages.size(); ++i) {
    ATOLL_ASSIGN_OR_RETURN(Slice slice, client.CreateMeshSlice(stages[i].mesh, stages[i].island));
    FunctionBuilder b(fmt::format("step{}", i));
    Value in = b.Input(DType::kF32, {kRows, kCols}, stages[i].sharding);
    switch (i % 3) {
      case 0:
        b.Output(b.Add(b.Mul(in, 2.0), 1.0));
        break;
      case 1:
        b.Output(b.Mul(in, in));
        break;
      default:
        b.Output(b.Sub(in, 3.0));
    }
    ATOLL_ASSIGN_OR_RETURN(Function fn, client.Register(b, slice));
    x = p.Call(fn, {x})[0];
  }
  p.Return({x});
  return p.Build();
}

TEST_F(ClusterTest, ChainsAcrossMeshesShardingsAndIslandsMatchASingleDevice) {
  auto client = Connect("reshard");
  ASSERT_NE(client, nullptr);
  const std::vector<Stage> spread = {
      {{2, 2}, "island0", Sharding::Axes({0, 1})},   // rows over axis 0, columns over axis 1
      {{2}, "island1", Sharding::Split(1)},          // columns over 2 devices
      {{4}, "island1", Sharding::Split(0)},          // rows over 4 devices
      {{2, 2}, "island0", Sharding::Axes({1, -1})},  // rows over axis 1, replicated on 0
      {{2}, "island0", Sharding::Replicated()},
  };
  std::vector<Stage> single;
  for (const auto& s : spread) single.push_back({{1}, s.island, Sharding::Replicated()});
  auto spread_program = Chain(*client, spread);
  ASSERT_THAT(spread_program, IsOk());
  auto single_program = Chain(*client, single);
  ASSERT_THAT(single_program, IsOk());

  std::mt19937 rng(5);
  std::uniform_real_distribution<float> value(-2, 2);
  for (int trial = 0; trial < 10; ++trial) {
    std::vector<float> v(kRows * kCols);
    for (auto& x : v) x = value(rng);
    const Tensor input = Tensor::F32({kRows, kCols}, v);
    auto spread_run = client->Submit(*spread_program, {input});
    ASSERT_THAT(spread_run, IsOk());
    auto single_run = client->Submit(*single_program, {input});
    ASSERT_THAT(single_run, IsOk());
    auto got = spread_run->Wait(20s);
    ASSERT_THAT(got, IsOk()) << "trial " << trial << ": " << got.status().ToString();
    auto want = single_run->Wait(20s);
    ASSERT_THAT(want, IsOk()) << "trial " << trial << ": " << want.status().ToString();
    EXPECT_EQ(got->at(0), want->at(0))
        << "trial " << trial << ": " << got->at(0).ToString() << " vs " << want->at(0).ToString();
  }
}

}  // namespace
}  // namespace atl::testing
