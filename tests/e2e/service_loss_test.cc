// A scheduler or an object store SIGKILLed in the middle of a program: the program fails
// within the liveness window plus one heartbeat period of the kill, naming the lost
// service; a program that does not need it completes meanwhile; once the service is
// restarted, the same program runs again. A client the RM dropped (silent past its lapse,
// as a paused process is) learns why at its next call.
#include <signal.h>

#include <chrono>
#include <iostream>

#include <fmt/format.h>

#include "common/net/transport.h"
#include "common/proto/ids.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/event_recorder.h"
#include "tests/e2e/member_context.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class ServiceLossTest : public ClusterTest {
 public:
  static void SetUpTestSuite() { StartCluster(ATOLL_SOURCE_DIR "/tests/e2e/liveness.toml"); }

  // The bound the issue sets: a service is declared lost `liveness` periods after its last
  // heartbeat, which came at most a period before the kill; the runs that need it fail at
  // once (within a quarter period: how often clients and the RM look).
  static std::chrono::milliseconds LossBound() {
    const ClusterConfig& config = cluster_->config();
    return std::chrono::milliseconds(config.heartbeat_ms) * (config.liveness + 1);
  }

  // A program of `steps` spins of `step_us` each, one after another on a two-device slice,
  // dispatched one call at a time: killed mid-way, it still has work the lost service was to
  // do. `x` comes back plus `steps`.
  struct Chain {
    Function step;
    Program program;
  };
  static Chain MakeChain(Client& client, const Slice& slice, int steps, double step_us) {
    FunctionBuilder b("step");
    b.Output(b.Spin(b.Add(b.Input(DType::kF32, {4}), 1.0), step_us));
    Function step = client.Register(b, slice).value();
    ProgramBuilder p;
    Traced v = p.Arg(DType::kF32, {4});
    for (int i = 0; i < steps; ++i) v = p.Call(step, {v})[0];
    p.Return({v});
    return {step, p.Build().value()};
  }

  static Tensor X() { return Tensor::F32({4}, {1, 2, 3, 4}); }
  static Tensor XPlus(float n) { return Tensor::F32({4}, {1 + n, 2 + n, 3 + n, 4 + n}); }

  // Submits `doomed` one call at a time, SIGKILLs `service` once a shard of it was admitted
  // (on `host`, when not empty), and checks that the run fails within the bound, naming
  // the lost service as `named`.
  static void KillMidRun(Client& client, const Chain& doomed, const std::string& host,
                         const std::string& service, const std::string& named) {
    EventRecorder events(EventsEndpoint());
    SubmitOptions one_at_a_time;
    one_at_a_time.sequential = true;
    auto run = client.Submit(doomed.program, {X()}, one_at_a_time);
    ASSERT_THAT(run, IsOk());
    ASSERT_TRUE(events
                    .WaitFor(
                        "dispatch.admitted",
                        [&](const Event& e) {
                          return e.fields["run"].get<uint64_t>() == run->id() &&
                                 (host.empty() || e.fields["host"] == host);
                        },
                        20s)
                    .has_value());
    const auto killed_at = Clock::now();
    ASSERT_THAT(cluster_->Signal(service, SIGKILL), IsOk());
    auto out = run->Wait(30s);
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed_at);
    ASSERT_FALSE(out.ok()) << "the run completed";
    RecordProperty("failed_after_kill_ms", static_cast<int>(took.count()));
    std::cout << "failed " << took.count() << " ms after the kill\n";
    EXPECT_EQ(out.status().code(), Code::kUnavailable) << out.status().ToString();
    EXPECT_NE(out.status().message().find(named), std::string::npos) << out.status().ToString();
    EXPECT_LE(took, LossBound()) << out.status().ToString();
  }

  // Runs `chain` of `steps` steps and checks its value.
  static void ExpectRuns(Client& client, const Chain& chain, int steps) {
    auto run = client.Submit(chain.program, {X()});
    ASSERT_THAT(run, IsOk());
    auto out = run->Wait(60s);
    ASSERT_THAT(out, IsOk());
    EXPECT_EQ(out->at(0), XPlus(static_cast<float>(steps)));
  }
};

TEST_F(ServiceLossTest, KilledSchedulerFailsItsIslandsRunsOthersGoOnAndItsRestartServesAgain) {
  auto client = Connect("scheduler-loss");
  ASSERT_NE(client, nullptr);
  auto doomed_slice = client->CreateSlice(2, "island0");
  ASSERT_THAT(doomed_slice, IsOk());
  auto other_slice = client->CreateSlice(2, "island1");
  ASSERT_THAT(other_slice, IsOk());
  const Chain doomed = MakeChain(*client, *doomed_slice, 40, 100e3);  // 4 s of work
  const Chain other = MakeChain(*client, *other_slice, 3, 1e3);
  EventRecorder declared(EventsEndpoint());
  KillMidRun(*client, doomed, "", "scheduler-island0", "the scheduler of island island0");
  if (HasFatalFailure()) return;
  // The client may fail the run on the scheduler's dropped connection, before the RM
  // declares the scheduler lost (what the refusals below need); the RM does soon after.
  ASSERT_TRUE(
      declared
          .WaitFor(
              "island.lost", [](const Event& e) { return e.fields["island"] == "island0"; }, 10s)
          .has_value());

  // The other island's scheduler serves on; no new slice goes to the lost island.
  ExpectRuns(*client, other, 3);
  auto refused = client->CreateSlice(1, "island0");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kUnavailable) << refused.status().ToString();
  // A program that needs the lost scheduler is refused at once, naming it.
  auto too_soon = client->Submit(doomed.program, {X()});
  ASSERT_FALSE(too_soon.ok());
  EXPECT_NE(too_soon.status().message().find("island0"), std::string::npos)
      << too_soon.status().ToString();

  // Restarted, it registers again and takes its island back.
  EventRecorder events(EventsEndpoint());
  ASSERT_THAT(cluster_->Restart("scheduler-island0", SIGKILL), IsOk());
  ASSERT_TRUE(
      events
          .WaitFor(
              "island.back", [](const Event& e) { return e.fields["island"] == "island0"; }, 20s)
          .has_value());
  ExpectRuns(*client, doomed, 40);
}

TEST_F(ServiceLossTest, KilledObjectStoreFailsRunsOnItsHostOthersGoOnAndItsRestartServesAgain) {
  auto client = Connect("store-loss");
  ASSERT_NE(client, nullptr);
  auto doomed_slice = client->CreateSlice(2, "island1");  // one device on each host
  ASSERT_THAT(doomed_slice, IsOk());
  auto other_slice = client->CreateSlice(2, "island0");
  ASSERT_THAT(other_slice, IsOk());
  const Chain doomed = MakeChain(*client, *doomed_slice, 40, 100e3);
  const Chain other = MakeChain(*client, *other_slice, 3, 1e3);
  EventRecorder declared(EventsEndpoint());
  KillMidRun(*client, doomed, "i1h0", "objectstore-i1h0", "the object store of host i1h0");
  if (HasFatalFailure()) return;
  // The client may fail the run on the store's dropped connection, before the RM declares
  // the store lost (what the placement below needs); the RM does soon after.
  ASSERT_TRUE(
      declared
          .WaitFor(
              "host.store_lost", [](const Event& e) { return e.fields["host"] == "i1h0"; }, 10s)
          .has_value());

  // Other hosts serve on, and new slices keep off the host without a store.
  ExpectRuns(*client, other, 3);
  auto elsewhere = client->CreateSlice(2, "island1");
  ASSERT_THAT(elsewhere, IsOk());
  {
    MemberContext context;
    net::Requester rm(context, RmEndpoint());
    ASSERT_THAT(rm.Connect(), IsOk());
    auto status = rm.Call<proto::ClusterStatus>(proto::GetClusterStatus{}, 5s);
    ASSERT_THAT(status, IsOk());
    for (const auto& island : status->islands) {
      for (const auto& host : island.hosts) {
        EXPECT_EQ(host.store_alive, host.name != "i1h0") << host.name;
        if (host.name != "i1h0") continue;
        for (const auto& d : host.devices) {
          for (const auto& s : status->slices) {
            if (s.slice_id != elsewhere->id()) continue;
            EXPECT_EQ(std::count(s.device_ids.begin(), s.device_ids.end(), d.device_id), 0)
                << "new slice placed on device " << d.device_id << " of the storeless host";
          }
        }
      }
    }
  }

  // Restarted, the store is used again: the same program runs on the same devices.
  EventRecorder events(EventsEndpoint());
  ASSERT_THAT(cluster_->Restart("objectstore-i1h0", SIGKILL), IsOk());
  ASSERT_TRUE(
      events
          .WaitFor(
              "host.store_back", [](const Event& e) { return e.fields["host"] == "i1h0"; }, 20s)
          .has_value());
  ExpectRuns(*client, doomed, 40);
}

TEST_F(ServiceLossTest, AClientTheRmDroppedIsToldWhyAtItsNextCall) {
  MemberContext context;
  net::Requester rm(context, RmEndpoint());
  ASSERT_THAT(rm.Connect(), IsOk());
  EventRecorder events(EventsEndpoint());
  // One that never heartbeats (a process paused from the start), one that says goodbye.
  auto silent = rm.Call<proto::HelloClientReply>(proto::HelloClient{"paused"}, 5s);
  auto leaving = rm.Call<proto::HelloClientReply>(proto::HelloClient{"leaving"}, 5s);
  ASSERT_TRUE(silent.ok() && leaving.ok()) << silent.status().ToString();
  ASSERT_THAT(rm.Call<proto::Ok>(proto::Goodbye{leaving->client_id}, 5s), IsOk());
  const auto is_silent = [&](const Event& e) { return e.fields["client"] == silent->client_id; };
  ASSERT_TRUE(events.WaitFor("client.gone", is_silent, 10 * LossBound()))
      << "the RM did not drop the silent client";

  const ClusterConfig& config = cluster_->config();
  const Status dropped =
      rm.Call<proto::SliceInfo>(proto::CreateSlice{silent->client_id, 1, "", ""}, 5s).status();
  EXPECT_EQ(dropped.code(), Code::kNotFound);
  EXPECT_EQ(dropped.message(),
            fmt::format("create a slice: client {} has left the cluster (heartbeat lapsed: the RM "
                        "heard none from it for {} ms); connect again",
                        silent->client_id, config.heartbeat_ms * config.liveness));
  const Status gone = rm.Call<proto::Ok>(proto::Goodbye{leaving->client_id}, 5s).status();
  EXPECT_EQ(gone.message(),
            fmt::format("say goodbye: client {} has left the cluster (goodbye); connect again",
                        leaving->client_id));
  // A store (as a scheduler would) refuses the dropped client's work saying why, as the RM
  // told it: an executor creating an output for it is told the client lapsed.
  const ProcessInfo* store = cluster_->info().Find("objectstore-i0h0");
  ASSERT_NE(store, nullptr);
  net::Requester store_link(context, store->endpoints.at("endpoint"));
  ASSERT_THAT(store_link.Connect(), IsOk());
  const auto create_for = [&](uint64_t client) {
    return store_link
        .Call<proto::CreateObjectReply>(
            proto::CreateObject{proto::MakeObjectId(client, 1), 0, client, DType::kF32, {2}}, 5s)
        .status();
  };
  const Status refused = create_for(silent->client_id);
  EXPECT_EQ(refused.code(), Code::kCancelled);
  EXPECT_EQ(refused.message(),
            fmt::format("client {} has left the cluster (heartbeat lapsed: the RM heard none "
                        "from it for {} ms)",
                        silent->client_id, config.heartbeat_ms * config.liveness));
  EXPECT_EQ(create_for(leaving->client_id).message(),
            fmt::format("client {} has left the cluster (goodbye)", leaving->client_id));

  const uint64_t never = leaving->client_id + 1000;
  const Status unknown =
      rm.Call<proto::SliceInfo>(proto::CreateSlice{never, 1, "", ""}, 5s).status();
  EXPECT_EQ(unknown.message(), fmt::format("create a slice: client {} is unknown; say "
                                           "HelloClient first",
                                           never));
}

}  // namespace
}  // namespace atl::testing
