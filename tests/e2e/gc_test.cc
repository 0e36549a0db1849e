// Garbage collection: a client process killed with SIGKILL (no Goodbye) loses every object
// it owned, on every host, once its heartbeats lapse; another client's objects stay.
#include <signal.h>

#include <map>
#include <set>

#include "common/net/transport.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/event_recorder.h"
#include "tests/e2e/member_context.h"
#include "tests/e2e/store_stats.h"
#include "tests/launcher/subprocess.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

// small_memory.toml: heartbeat_ms = 100, liveness = 4.
constexpr auto kHeartbeat = 100ms;
constexpr int kLiveness = 4;

using GcTest = SmallMemoryClusterTest;

// Starts the helper client and waits (bounded) for its "ready <id>" line.
std::optional<uint64_t> StartDoomedClient(Subprocess& process) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    const bool ended = process.Poll(50ms);
    const std::string& out = process.out();
    if (auto at = out.find("ready "); at != std::string::npos && out.find('\n', at) != out.npos) {
      return std::stoull(out.substr(at + 6));
    }
    if (ended) break;
  }
  ADD_FAILURE() << "the helper client was not ready: " << process.Wait(1s).Describe();
  return std::nullopt;
}

TEST_F(GcTest, KilledClientProcessLosesItsObjectsOnEveryHostOthersKeepTheirs) {
  // A client that stays: its program's arguments and results on both hosts.
  auto keeper = Connect("keeper");
  ASSERT_NE(keeper, nullptr);
  auto slice = keeper->CreateSlice(2);
  ASSERT_THAT(slice, IsOk());
  FunctionBuilder b("inc");
  b.Output(b.Add(b.Input(DType::kF32, {4}), 1.0));
  auto inc = keeper->Register(b, *slice);
  ASSERT_THAT(inc, IsOk());
  ProgramBuilder p;
  p.Return({p.Call(*inc, {p.Arg(DType::kF32, {4})})[0]});
  auto kept = keeper->Submit(p.Build().value(), {Tensor::F32({4}, {1, 2, 3, 4})});
  ASSERT_THAT(kept, IsOk());
  ASSERT_THAT(kept->Wait(30s), IsOk());

  EventRecorder events(EventsEndpoint());
  Subprocess doomed({ATOLL_GC_CLIENT, RmEndpoint()});
  const std::optional<uint64_t> doomed_id = StartDoomedClient(doomed);
  ASSERT_TRUE(doomed_id.has_value());

  MemberContext context;
  const auto before = StoreStatsByHost(context, RmEndpoint());
  ASSERT_EQ(before.size(), 2u);
  for (const auto& [host, stats] : before) {
    EXPECT_GT(ObjectsOf(stats, *doomed_id), 0u) << "the helper owns nothing on " << host;
    EXPECT_GT(ObjectsOf(stats, keeper->id()), 0u) << "the keeper owns nothing on " << host;
  }

  ASSERT_EQ(kill(doomed.pid(), SIGKILL), 0);
  const auto killed_at = std::chrono::steady_clock::now();
  std::set<std::string> collected_by;  // the stores that collected it
  while (collected_by.size() < 2) {
    auto e = events.WaitFor(
        "object.collected",
        [&](const Event& ev) { return ev.fields["client"].get<uint64_t>() == *doomed_id; }, 5s);
    if (!e) break;
    collected_by.insert(e->fields["src"].get<std::string>());
  }
  const auto took = std::chrono::steady_clock::now() - killed_at;
  EXPECT_EQ(collected_by, (std::set<std::string>{"objectstore/h0", "objectstore/h1"}));
  // Silence for `liveness` beats, plus at most one period until the store's next check,
  // plus one of slack for a loaded machine.
  EXPECT_LT(took, kHeartbeat * (kLiveness + 2))
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  EXPECT_EQ(doomed.Wait(5s).exit_code, 128 + SIGKILL);

  const auto after = StoreStatsByHost(context, RmEndpoint());
  for (const auto& [host, stats] : after) {
    EXPECT_EQ(ObjectsOf(stats, *doomed_id), 0u) << host;
    EXPECT_EQ(ObjectsOf(stats, keeper->id()), ObjectsOf(before.at(host), keeper->id())) << host;
  }
  auto again = kept->Wait(10s);  // the keeper's results are still there to read
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->at(0), Tensor::F32({4}, {2, 3, 4, 5}));
}

}  // namespace
}  // namespace atl::testing
