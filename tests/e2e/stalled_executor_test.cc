// An executor that reads nothing for a while (stopped with SIGSTOP, as one whose loop is
// stalled is, while the RM still counts it alive) as a client streams programs to it. Its
// scheduler holds the dispatches the executor's full queue refuses, in order, rather than
// failing those runs; it goes on serving the island's other host meanwhile; and once the
// executor reads again, every run finishes with the right value.
#include <signal.h>

#include <string>
#include <vector>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/event_recorder.h"
#include "tests/e2e/rm_topology.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kCalls = 64;  // per program: a dispatch of some kilobytes
// The stream's bound. The executor's queue fills after ExecutorLinks::kQueueMessages
// dispatches and the kernel's buffers (megabytes): about 2,000 programs, one dispatch each,
// on an idle machine; on a loaded one the scheduler sends the submissions of a loop turn
// (up to the client's 256 unanswered) as one dispatch, and it takes about three times more.
constexpr int kMaxPrograms = 20000;
constexpr int kAfterHeld = 50;  // programs streamed once dispatches are held

// Its own cluster (tests/e2e/long_liveness.toml): a stopped executor stays alive for the
// RM for 30 s.
class StalledExecutorTest : public ClusterTest {
 public:
  static void SetUpTestSuite() { StartCluster(ATOLL_SOURCE_DIR "/tests/e2e/long_liveness.toml"); }

 protected:
  // x + kCalls over `slice`, one call after another, x a replicated f32[2].
  static Program Chain(Client& client, const Slice& slice) {
    FunctionBuilder b("inc");
    b.Output(b.Add(b.Input(DType::kF32, {2}, Sharding::Replicated()), 1.0));
    Function inc = client.Register(b, slice).value();
    ProgramBuilder p;
    Traced x = p.Arg(DType::kF32, {2});
    for (int i = 0; i < kCalls; ++i) x = p.Call(inc, {x})[0];
    p.Return({x});
    return p.Build().value();
  }

  // Whether `e` is a scheduler.stats that counts held dispatches, or none (`held` false).
  static bool HeldStats(const Event& e, bool held) {
    return e.topic == "scheduler.stats" && e.fields.contains("dispatches_held") &&
           (e.fields["dispatches_held"].get<uint64_t>() > 0) == held;
  }
};

TEST_F(StalledExecutorTest, DispatchesAreHeldInOrderUntilTheExecutorReadsAgain) {
  auto streamer = Connect("streamer");
  auto bystander = Connect("bystander");
  ASSERT_NE(streamer, nullptr);
  ASSERT_NE(bystander, nullptr);
  auto stalled_slice = streamer->CreateSlice(1, "island0");
  ASSERT_THAT(stalled_slice, IsOk());
  auto other_slice = bystander->CreateSlice(1, "island0");
  ASSERT_THAT(other_slice, IsOk());
  const Topology topology = AskRm(RmEndpoint());
  const auto stalled_hosts = HostsOf(topology, stalled_slice->id());
  ASSERT_EQ(stalled_hosts.size(), 1u);
  ASSERT_NE(HostsOf(topology, other_slice->id()), stalled_hosts) << "both slices on one host";
  const std::string stalled = "executor-" + *stalled_hosts.begin();
  const Program chain = Chain(*streamer, *stalled_slice);
  const Program other = Chain(*bystander, *other_slice);

  EventRecorder events(EventsEndpoint());
  ASSERT_THAT(cluster_->Signal(stalled, SIGSTOP), IsOk());
  std::vector<atl::Run> runs;
  Status refused;
  int after_held = -1;  // programs streamed since dispatches were first seen held
  while (runs.size() < size_t{kMaxPrograms} && after_held < kAfterHeld) {
    const auto i = static_cast<float>(runs.size());
    auto run = streamer->Submit(chain, {Tensor::F32({2}, {i, -i})});
    if (!run.ok()) {
      refused = run.status();
      break;
    }
    runs.push_back(std::move(run).value());
    if (after_held >= 0) after_held++;
    while (after_held < 0) {
      auto e = events.Next(0ms);
      if (!e) break;
      if (HeldStats(*e, true)) after_held = 0;
    }
  }
  // The other host is served while dispatches wait for the stalled one.
  auto served = bystander->Submit(other, {Tensor::F32({2}, {1, 2})});
  auto served_out = served.ok() ? served->Wait(20s) : Result<std::vector<Tensor>>(served.status());
  ASSERT_THAT(cluster_->Signal(stalled, SIGCONT), IsOk());

  ASSERT_THAT(refused, IsOk()) << "submission " << runs.size() << ": " << refused.ToString();
  ASSERT_EQ(after_held, kAfterHeld) << "no dispatch was held after " << runs.size()
                                    << " programs: the executor's queue never filled";
  ASSERT_THAT(served_out, IsOk());
  EXPECT_EQ(served_out->at(0), Tensor::F32({2}, {1 + kCalls, 2 + kCalls}));
  for (size_t i = 0; i < runs.size(); ++i) {
    auto out = runs[i].Wait(60s);
    ASSERT_THAT(out, IsOk()) << "run " << i << " of " << runs.size() << ": "
                             << out.status().ToString();
    const auto x = static_cast<float>(i);
    ASSERT_EQ(out->at(0), Tensor::F32({2}, {x + kCalls, -x + kCalls})) << "run " << i;
  }
  EXPECT_TRUE(events.WaitFor(
      "scheduler.stats", [](const Event& e) { return HeldStats(e, false); }, 10s))
      << "the scheduler still holds dispatches";
}

}  // namespace
}  // namespace atl::testing
