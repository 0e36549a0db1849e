// Batching with a time window, end to end: a node on 4 devices of host a feeds a node on 4
// devices of host b. With a window, the 4 tuples that cross go in one TupleBatch per run
// (seen in the executors' dataplane.stats events), and the result is still exact.
#include <fmt/format.h>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/event_recorder.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

class BatchingTest : public ClusterTest {
 public:
  static void SetUpTestSuite() { StartCluster(ATOLL_SOURCE_DIR "/tests/e2e/batching.toml"); }
};

constexpr int64_t kRows = 8;

Result<Program> CrossHostChain(Client& client) {
  ProgramBuilder p;
  Traced x = p.Arg(DType::kF32, {kRows});
  ATOLL_ASSIGN_OR_RETURN(Slice first, client.CreateMeshSlice({4}, "island0"));
  ATOLL_ASSIGN_OR_RETURN(Slice second, client.CreateMeshSlice({4}, "island1"));
  FunctionBuilder f("affine");
  f.Output(f.Add(f.Mul(f.Input(DType::kF32, {kRows}, Sharding::Split(0)), 2.0), 1.0));
  ATOLL_ASSIGN_OR_RETURN(Function affine, client.Register(f, first));
  FunctionBuilder g("square");
  Value in = g.Input(DType::kF32, {kRows}, Sharding::Split(0));
  g.Output(g.Mul(in, in));
  ATOLL_ASSIGN_OR_RETURN(Function square, client.Register(g, second));
  p.Return({p.Call(square, {p.Call(affine, {x})[0]})[0]});
  return p.Build();
}

TEST_F(BatchingTest, SmallTuplesToOneHostShareABatchWithinTheWindow) {
  EventRecorder events(EventsEndpoint());
  auto client = Connect("batching");
  ASSERT_NE(client, nullptr);
  auto program = CrossHostChain(*client);
  ASSERT_THAT(program, IsOk());

  constexpr uint64_t kRuns = 3;
  std::vector<float> v(kRows);
  for (uint64_t run = 0; run < kRuns; ++run) {
    for (int64_t i = 0; i < kRows; ++i) v[i] = float(i) - float(run);
    auto submitted = client->Submit(*program, {Tensor::F32({kRows}, v)});
    ASSERT_THAT(submitted, IsOk());
    auto got = submitted->Wait(20s);
    ASSERT_THAT(got, IsOk()) << "run " << run << ": " << got.status().ToString();
    std::vector<float> want(kRows);
    for (int64_t i = 0; i < kRows; ++i) want[i] = (2 * v[i] + 1) * (2 * v[i] + 1);
    EXPECT_EQ(got->at(0), Tensor::F32({kRows}, want)) << got->at(0).ToString();
  }

  // Each run sent 4 tuples from a to b; each run's 4 went in one batch.
  auto stats = events.WaitFor(
      "dataplane.stats",
      [](const Event& e) {
        return e.fields["host"] == "a" && e.fields["tuples_out"].get<uint64_t>() >= 4 * kRuns;
      },
      10s);
  ASSERT_TRUE(stats.has_value()) << "host a never reported its tuples";
  EXPECT_EQ(stats->fields["tuples_out"].get<uint64_t>(), 4 * kRuns) << stats->fields.dump();
  EXPECT_EQ(stats->fields["batches_out"].get<uint64_t>(), kRuns) << stats->fields.dump();
  auto received = events.WaitFor(
      "dataplane.stats",
      [](const Event& e) {
        return e.fields["host"] == "b" && e.fields["tuples_in"].get<uint64_t>() >= 4 * kRuns;
      },
      10s);
  ASSERT_TRUE(received.has_value()) << "host b never reported the tuples";
  EXPECT_EQ(received->fields["batches_in"].get<uint64_t>(), kRuns) << received->fields.dump();
}

}  // namespace
}  // namespace atl::testing
