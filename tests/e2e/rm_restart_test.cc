// RM restart: the RM is killed (SIGKILL, as in a crash) and started again on the same
// endpoints while a client holds a slice. Its state file brings back the client, the slice
// and its devices, and the registered functions: the client's next program runs, and a new
// function registered on the old slice compiles on executors that reconnected by themselves.
// A restarted RM gives its peers a while to reconnect before it declares any of them lost,
// and an RM that stalled gives them a liveness lapse.
#include <signal.h>

#include <thread>

#include "common/net/transport.h"
#include "services/rm/rm_service.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/event_recorder.h"
#include "tests/e2e/member_context.h"
#include "tests/e2e/one_call_program.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

class RmRestartTest : public ClusterTest {
 public:
  static void SetUpTestSuite() { StartCluster(ATOLL_SOURCE_DIR "/tests/e2e/three_hosts.toml"); }
};

Result<proto::ClusterStatus> AskStatus(const std::string& rm) {
  MemberContext context;
  net::Requester peer(context, rm);
  ATOLL_RETURN_IF_ERROR(peer.Connect());
  return peer.Call<proto::ClusterStatus>(proto::GetClusterStatus{}, 5s);
}

// Whether the RM counts host `name`'s executor alive; an error when it cannot say.
Result<bool> HostAlive(const std::string& rm, const std::string& name) {
  ATOLL_ASSIGN_OR_RETURN(proto::ClusterStatus status, AskStatus(rm));
  for (const auto& island : status.islands) {
    for (const auto& host : island.hosts) {
      if (host.name == name) return host.alive;
    }
  }
  return NotFound("the RM does not know host " + name);
}

TEST_F(RmRestartTest, ClientsSlicesAndFunctionsSurviveAnRmRestart) {
  auto client = Connect("survivor");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateSlice(2);
  ASSERT_THAT(slice, IsOk());
  FunctionBuilder fb("inc");
  fb.Output(fb.Add(fb.Input(DType::kF32, {4}), 1.0));
  auto inc = client->Register(fb, *slice);
  ASSERT_THAT(inc, IsOk());
  ProgramBuilder pb;
  pb.Return({pb.Call(*inc, {pb.Arg(DType::kF32, {4})})[0]});
  const Program program = pb.Build().value();
  const Tensor x = Tensor::F32({4}, {1, 2, 3, 4});
  auto first = client->Submit(program, {x});
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(first->Wait(20s), IsOk());
  auto before = AskStatus(RmEndpoint());
  ASSERT_THAT(before, IsOk());

  ASSERT_THAT(cluster_->Restart("rm", SIGKILL), IsOk());

  // The restarted RM knows what the old one knew.
  auto after = AskStatus(RmEndpoint());
  ASSERT_THAT(after, IsOk());
  EXPECT_EQ(after->slices, before->slices);
  EXPECT_EQ(after->clients, 1u);
  EXPECT_EQ(after->functions, before->functions);

  // The client's next program runs.
  auto next = client->Submit(program, {x});
  ASSERT_THAT(next, IsOk());
  auto out = next->Wait(20s);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->at(0), Tensor::F32({4}, {2, 3, 4, 5}));

  // The RM still knows the client and its slice: a new function registers on it, compiled
  // by executors once they reconnected, and runs after the old one.
  FunctionBuilder gb("double");
  gb.Output(gb.Mul(gb.Input(DType::kF32, {4}), 2.0));
  auto twice = client->Register(gb, *slice);
  ASSERT_THAT(twice, IsOk());
  ProgramBuilder chain;
  chain.Return({chain.Call(*twice, {chain.Call(*inc, {chain.Arg(DType::kF32, {4})})[0]})[0]});
  auto chained = client->Submit(chain.Build().value(), {x});
  ASSERT_THAT(chained, IsOk());
  auto chained_out = chained->Wait(20s);
  ASSERT_THAT(chained_out, IsOk());
  EXPECT_EQ(chained_out->at(0), Tensor::F32({4}, {4, 6, 8, 10}));

  // And hands out new slices without reusing the old one's id.
  auto another = client->CreateSlice(1);
  ASSERT_THAT(another, IsOk());
  EXPECT_GT(another->id(), slice->id());
}

// Reconnecting to a restarted RM takes every peer a while (ZeroMQ's retry, a new security
// handshake, on a loaded machine up to seconds): the RM declares nobody lost before
// rm::kReconnectGrace, though a peer silent longer than the liveness window would be lost
// otherwise. The grace does not hide a peer that stays silent: it is lost after it.
TEST_F(RmRestartTest, ARestartedRmGivesItsPeersTimeToReconnectBeforeDeclaringThemLost) {
  const ClusterConfig& config = cluster_->config();
  const auto lapse = std::chrono::milliseconds(config.heartbeat_ms) * config.liveness;
  ASSERT_LT(2 * lapse, rm::kReconnectGrace) << "the test needs a liveness window shorter than this";
  ASSERT_THAT(cluster_->Signal("executor-h2", SIGSTOP), IsOk());
  Status restarted = cluster_->Restart("rm", SIGKILL);
  std::optional<EventRecorder> events;
  if (restarted.ok()) events.emplace(EventsEndpoint());  // the restarted RM's bus
  // The silence under test: past a liveness window, within the grace.
  if (restarted.ok()) std::this_thread::sleep_for(2 * lapse);
  auto during = HostAlive(RmEndpoint(), "h2");
  // Past the grace, the host still silent is lost.
  auto is_h2 = [](const Event& e) { return e.fields["host"] == "h2"; };
  const bool lost = events && events->WaitFor("host.lost", is_h2, rm::kReconnectGrace + 20s);
  ASSERT_THAT(cluster_->Signal("executor-h2", SIGCONT), IsOk());
  ASSERT_THAT(restarted, IsOk());
  ASSERT_THAT(during, IsOk());
  EXPECT_TRUE(*during) << "host h2 was declared lost " << 2 * lapse << " after the restart";
  EXPECT_TRUE(lost) << "host h2, silent past the grace, was not declared lost";
  // Heard again, it is back.
  EXPECT_TRUE(events->WaitFor("host.back", is_h2, 20s)) << "host h2 did not come back";
}

// A machine or container starved of CPU stops the RM and the schedulers beside it together
// (the head container of docker/compose.yaml). The silence the RM slept through is not held
// against them: resumed at about the same time, the island is not declared lost and runs
// on it go on.
TEST_F(RmRestartTest, AnRmThatStalledWithItsSchedulerDoesNotDeclareTheIslandLost) {
  const ClusterConfig& config = cluster_->config();
  const auto lapse = std::chrono::milliseconds(config.heartbeat_ms) * config.liveness;
  auto client = Connect("stalled");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateSlice(1);
  ASSERT_THAT(slice, IsOk());
  auto program =
      OneCall(*client, *slice, "inc", [](FunctionBuilder& b, Value x) { return b.Add(x, 1.0); });
  ASSERT_THAT(program, IsOk());
  EventRecorder events(EventsEndpoint());

  ASSERT_THAT(cluster_->Signal("rm", SIGSTOP), IsOk());
  const Status stopped = cluster_->Signal("scheduler-island0", SIGSTOP);
  if (stopped.ok()) std::this_thread::sleep_for(3 * lapse);  // the stall under test
  // The scheduler resumes a little after the RM, which runs a liveness check at once.
  ASSERT_THAT(cluster_->Signal("rm", SIGCONT), IsOk());
  std::this_thread::sleep_for(lapse / 4);
  ASSERT_THAT(cluster_->Signal("scheduler-island0", SIGCONT), IsOk());
  ASSERT_THAT(stopped, IsOk());

  auto run = client->Submit(*program, {Tensor::F32({2}, {1, 2})});
  ASSERT_THAT(run, IsOk());
  auto out = run->Wait(20s);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->at(0), Tensor::F32({2}, {2, 3}));
  // A loss would have been declared in the RM's first turn, before the run was submitted.
  while (auto e = events.Next(0ms)) {
    EXPECT_NE(e->topic, "island.lost") << e->fields.dump();
    EXPECT_NE(e->topic, "host.lost") << e->fields.dump();
  }
}

}  // namespace
}  // namespace atl::testing
