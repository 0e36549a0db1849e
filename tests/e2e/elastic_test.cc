// Elasticity: an executor killed (SIGKILL) in the middle of a program. The program fails
// naming the lost device and host (its surviving shard, waiting for the lost one's tuples,
// does not hang), a program on other devices completes, the RM remaps the slice onto the
// spare device, and the same program run again succeeds on the new mapping.
#include <signal.h>

#include <map>

#include "common/net/transport.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/event_recorder.h"
#include "tests/e2e/member_context.h"
#include "tests/e2e/rm_topology.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

class ElasticTest : public ClusterTest {
 public:
  static void SetUpTestSuite() { StartCluster(ATOLL_SOURCE_DIR "/tests/e2e/three_hosts.toml"); }
};

TEST_F(ElasticTest, KilledExecutorFailsItsProgramOthersGoOnTheSliceIsRemappedAndRunsAgain) {
  auto client = Connect("elastic");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateSlice(2);
  ASSERT_THAT(slice, IsOk());
  // f: split rows, slow enough to be killed while it runs. g: takes f's output replicated,
  // so each of its shards waits for a piece from the other host.
  FunctionBuilder fb("f");
  fb.Output(fb.Spin(fb.Add(fb.Input(DType::kF32, {4}), 1.0), 1.5e6));
  auto f = client->Register(fb, *slice);
  ASSERT_THAT(f, IsOk());
  FunctionBuilder gb("g");
  gb.Output(gb.Mul(gb.Input(DType::kF32, {4}, Sharding::Replicated()), 2.0));
  auto g = client->Register(gb, *slice);
  ASSERT_THAT(g, IsOk());
  ProgramBuilder pb;
  pb.Return({pb.Call(*g, {pb.Call(*f, {pb.Arg(DType::kF32, {4})})[0]})[0]});
  const Program program = pb.Build().value();
  const Tensor x = Tensor::F32({4}, {1, 2, 3, 4});
  const Tensor want = Tensor::F32({4}, {4, 6, 8, 10});

  // Another client's one-device slice lands on the host the first slice left free.
  auto other = Connect("bystander");
  ASSERT_NE(other, nullptr);
  auto other_slice = other->CreateSlice(1);
  ASSERT_THAT(other_slice, IsOk());
  FunctionBuilder hb("h");
  hb.Output(hb.Add(hb.Input(DType::kF32, {4}), 10.0));
  auto h = other->Register(hb, *other_slice);
  ASSERT_THAT(h, IsOk());
  ProgramBuilder ob;
  ob.Return({ob.Call(*h, {ob.Arg(DType::kF32, {4})})[0]});
  const Program other_program = ob.Build().value();

  const Topology before = AskRm(RmEndpoint());
  ASSERT_EQ(before.slices.at(slice->id()).size(), 2u);
  const uint32_t lost_device = before.slices.at(slice->id())[1];
  const std::string victim = before.host_of.at(lost_device);
  const uint32_t spare_device = before.slices.at(other_slice->id())[0];
  ASSERT_NE(before.host_of.at(spare_device), victim);

  EventRecorder events(EventsEndpoint());
  auto doomed = client->Submit(program, {x});
  ASSERT_THAT(doomed, IsOk());
  // Killed once its shards are queued on the victim, while f spins there.
  ASSERT_TRUE(events
                  .WaitFor(
                      "dispatch.admitted",
                      [&](const Event& e) {
                        return e.fields["run"].get<uint64_t>() == doomed->id() &&
                               e.fields["host"].get<std::string>() == victim;
                      },
                      20s)
                  .has_value());
  ASSERT_THAT(cluster_->Signal("executor-" + victim, SIGKILL), IsOk());

  // Bounded well below the argument and collective waits (30 s): the lost host is noticed
  // after 4 missed heartbeats of 100 ms, and the surviving shard fails at once.
  const auto failed_at = std::chrono::steady_clock::now();
  auto failed = doomed->Wait(20s);
  ASSERT_FALSE(failed.ok()) << "the program on the lost device completed";
  EXPECT_EQ(failed.status().code(), Code::kUnavailable) << failed.status().ToString();
  const std::string message = failed.status().message();
  EXPECT_NE(message.find("device " + std::to_string(lost_device) + " on host " + victim),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("lost"), std::string::npos) << message;
  EXPECT_LT(std::chrono::steady_clock::now() - failed_at, 10s);

  // The bystander's program, on another device, is not disturbed.
  auto other_run = other->Submit(other_program, {x});
  ASSERT_THAT(other_run, IsOk());
  auto other_out = other_run->Wait(20s);
  ASSERT_THAT(other_out, IsOk());
  EXPECT_EQ(other_out->at(0), Tensor::F32({4}, {11, 12, 13, 14}));

  // The RM moved virtual device 1 onto the spare device and compiled f and g there.
  auto remapped = events.WaitFor(
      "slice.remapped",
      [&](const Event& e) { return e.fields["slice"].get<uint64_t>() == slice->id(); }, 20s);
  ASSERT_TRUE(remapped.has_value()) << "no slice.remapped for slice " << slice->id();
  EXPECT_NE(remapped->fields["reason"].get<std::string>().find(victim), std::string::npos);
  const Topology after = AskRm(RmEndpoint());
  EXPECT_EQ(after.slices.at(slice->id()),
            (std::vector<uint32_t>{before.slices.at(slice->id())[0], spare_device}));

  // The same program, lowered again onto the new mapping, runs.
  auto again = client->Submit(program, {x});
  ASSERT_THAT(again, IsOk());
  auto out = again->Wait(30s);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->at(0), want);
}

}  // namespace
}  // namespace atl::testing
