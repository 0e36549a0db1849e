// Per-client quotas on a real cluster (tests/e2e/quotas.toml: one host h0 of four simulated
// devices; per client 2 slices, 3 devices, 1 MiB in each object store, 2 runs in flight).
// A client over a quota is refused with ResourceExhausted naming it, another client is
// not, and what is released, cancelled or finished gives the quota back.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/doubling_program.h"
#include "tests/e2e/event_recorder.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

class QuotaTest : public ClusterTest {
 public:
  static void SetUpTestSuite() { StartCluster(ATOLL_SOURCE_DIR "/tests/e2e/quotas.toml"); }
};

constexpr uint64_t kQuotaBytes = 1 << 20;  // quotas.toml's store_bytes
constexpr int64_t kElems = 96 * 1024;      // f32: 384 KiB

// Runs Doubling(n) (8n bytes of its client's quota on h0 while it holds them) on f32[n]
// ones and checks the result; the Run is returned, holding its objects.
std::optional<atl::Run> RunDoubling(Client& client, const Program& program, int64_t n) {
  auto run = client.Submit(program, {Filled(n, 1)});
  EXPECT_THAT(run, IsOk());
  if (!run.ok()) return std::nullopt;
  auto out = run->Wait(30s);
  EXPECT_THAT(out, IsOk());
  if (out.ok()) {
    EXPECT_EQ(out->at(0), Filled(n, 2));
  }
  return std::move(run).value();
}

std::string QuotaMessage(uint64_t client, const std::string& quota, const std::string& where,
                         const std::string& unit, uint64_t in_use, uint64_t requested,
                         uint64_t limit) {
  return "client " + std::to_string(client) + " over its " + quota + " quota" + where + ": " +
         std::to_string(in_use) + " " + unit + " in use + " + std::to_string(requested) +
         " requested > " + std::to_string(limit);
}

// Waits for `count` object.freed events of objects of `client` (ids are client << 40 | n).
bool AwaitFreed(EventRecorder& events, uint64_t client, int count) {
  for (int i = 0; i < count; ++i) {
    auto freed = events.WaitFor(
        "object.freed",
        [&](const Event& e) { return e.fields["object"].get<uint64_t>() >> 40 == client; }, 10s);
    if (!freed) return false;
  }
  return true;
}

TEST_F(QuotaTest, AClientOverItsByteQuotaIsRefusedAndAnotherIsNot) {
  auto a = Connect("over");
  auto b = Connect("other");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto a_slice = a->CreateSlice(1);
  auto b_slice = b->CreateSlice(1);
  ASSERT_TRUE(a_slice.ok() && b_slice.ok());
  auto a_program = Doubling(*a, *a_slice, kElems);
  auto b_program = Doubling(*b, *b_slice, kElems);
  ASSERT_TRUE(a_program.ok() && b_program.ok());
  EventRecorder events(EventsEndpoint());

  // 768 KiB held: its argument and its result.
  std::optional<atl::Run> held = RunDoubling(*a, *a_program, kElems);
  ASSERT_TRUE(held.has_value());
  // The next argument would take it to 1152 KiB: the put is refused, naming the quota.
  auto refused = a->Submit(*a_program, {Filled(kElems, 1)});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kResourceExhausted) << refused.status().ToString();
  const std::string expected = QuotaMessage(a->id(), "store_bytes", " on host h0", "bytes",
                                            2 * kElems * 4, kElems * 4, kQuotaBytes);
  EXPECT_NE(refused.status().message().find(expected), std::string::npos)
      << refused.status().ToString();
  auto error = events.WaitFor(
      "error.store", [](const Event& e) { return e.fields["code"] == "ResourceExhausted"; }, 10s);
  ASSERT_TRUE(error.has_value()) << "no error.store event for the refusal";
  EXPECT_NE(error->fields["error"].get<std::string>().find(expected), std::string::npos)
      << error->fields.dump();

  // Another client of the same store has a quota of its own: it runs.
  EXPECT_TRUE(RunDoubling(*b, *b_program, kElems).has_value());

  // Released, the first run's objects give the quota back: the whole of it fits now.
  held.reset();
  ASSERT_TRUE(AwaitFreed(events, a->id(), 2)) << "the released objects were never freed";
  auto whole = Doubling(*a, *a_slice, kQuotaBytes / 8);  // argument + result = 1 MiB
  ASSERT_THAT(whole, IsOk());
  EXPECT_TRUE(RunDoubling(*a, *whole, kQuotaBytes / 8).has_value());
}

TEST_F(QuotaTest, AnOutputOverTheQuotaFailsItsRunWithTheQuotaError) {
  constexpr int64_t kSmall = kElems / 2;  // 192 KiB
  auto a = Connect("outputs");
  ASSERT_NE(a, nullptr);
  auto slice = a->CreateSlice(1);
  ASSERT_THAT(slice, IsOk());
  auto big = Doubling(*a, *slice, kElems);
  auto small = Doubling(*a, *slice, kSmall);
  ASSERT_TRUE(big.ok() && small.ok());
  EventRecorder events(EventsEndpoint());

  std::optional<atl::Run> held = RunDoubling(*a, *big, kElems);  // 768 KiB
  ASSERT_TRUE(held.has_value());
  // Its argument fits (960 KiB); its result, reserved by the executor, does not.
  auto submitted = a->Submit(*small, {Filled(kSmall, 1)});
  ASSERT_THAT(submitted, IsOk());
  std::optional<atl::Run> run = std::move(submitted).value();
  const auto start = std::chrono::steady_clock::now();
  auto out = run->Wait(30s);
  ASSERT_FALSE(out.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "it waited instead of failing";
  EXPECT_EQ(out.status().code(), Code::kResourceExhausted) << out.status().ToString();
  EXPECT_NE(out.status().message().find(QuotaMessage(a->id(), "store_bytes", " on host h0", "bytes",
                                                     2 * kElems * 4 + kSmall * 4, kSmall * 4,
                                                     kQuotaBytes)),
            std::string::npos)
      << out.status().ToString();

  // Both runs released (the failed one's argument and refused result too), the quota is
  // whole again, and still holds.
  run.reset();
  held.reset();
  ASSERT_TRUE(AwaitFreed(events, a->id(), 4)) << "the released objects were never freed";
  std::optional<atl::Run> again = RunDoubling(*a, *big, kElems);
  ASSERT_TRUE(again.has_value());
  auto over = a->Submit(*big, {Filled(kElems, 1)});
  EXPECT_EQ(over.status().code(), Code::kResourceExhausted) << over.status().ToString();
}

TEST_F(QuotaTest, SlicesAndTheirDevicesAreCountedPerClient) {
  auto a = Connect("slices");
  auto b = Connect("other");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EventRecorder events(EventsEndpoint());

  ASSERT_THAT(a->CreateSlice(2), IsOk());
  auto too_many_devices = a->CreateSlice(2);
  ASSERT_FALSE(too_many_devices.ok());
  EXPECT_EQ(too_many_devices.status().code(), Code::kResourceExhausted);
  const std::string devices = QuotaMessage(a->id(), "devices", "", "devices", 2, 2, 3);
  EXPECT_NE(too_many_devices.status().message().find(devices), std::string::npos)
      << too_many_devices.status().ToString();
  auto error = events.WaitFor(
      "error.rm", [](const Event& e) { return e.fields["code"] == "ResourceExhausted"; }, 10s);
  ASSERT_TRUE(error.has_value()) << "no error.rm event for the refusal";
  EXPECT_NE(error->fields["error"].get<std::string>().find(devices), std::string::npos)
      << error->fields.dump();

  ASSERT_THAT(a->CreateSlice(1), IsOk());  // 2 slices, 3 devices: both quotas full
  auto too_many_slices = a->CreateSlice(1);
  ASSERT_FALSE(too_many_slices.ok());
  EXPECT_EQ(too_many_slices.status().code(), Code::kResourceExhausted);
  EXPECT_NE(too_many_slices.status().message().find(
                QuotaMessage(a->id(), "slices", "", "slices", 2, 1, 2)),
            std::string::npos)
      << too_many_slices.status().ToString();

  // Another client may take the same devices up to its own quota.
  EXPECT_THAT(b->CreateSlice(3), IsOk());
}

// Submits `program` until a scheduler accepts it: a cancelled run leaves the flight when its
// executor's report reaches the scheduler, which the client cannot see; until then the
// submission is refused over the quota. Bounded by 10 s.
Result<atl::Run> SubmitOnceAccepted(Client& client, const Program& program) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (true) {
    ATOLL_ASSIGN_OR_RETURN(atl::Run run, client.Submit(program, {Filled(4, 1)}));
    // Refused: Wait says so as soon as the scheduler answers; accepted, it spins for a
    // minute and the wait runs out.
    auto out = run.Wait(2s);
    if (out.status().code() != Code::kResourceExhausted) return run;
    if (std::chrono::steady_clock::now() > deadline) return out.status();
  }
}

TEST_F(QuotaTest, RunsInFlightAreCountedUntilTheyEnd) {
  auto a = Connect("busy");
  auto b = Connect("other");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto slice = a->CreateSlice(1);
  ASSERT_THAT(slice, IsOk());
  FunctionBuilder f("spin");
  f.Output(f.Spin(f.Input(DType::kF32, {4}), 60e6));  // a minute: until cancelled
  auto spin_fn = a->Register(f, *slice);
  ASSERT_THAT(spin_fn, IsOk());
  ProgramBuilder p;
  p.Return({p.Call(*spin_fn, {p.Arg(DType::kF32, {4})})[0]});
  auto spin = p.Build();
  ASSERT_THAT(spin, IsOk());
  EventRecorder events(EventsEndpoint());

  auto first = a->Submit(*spin, {Filled(4, 1)});
  auto second = a->Submit(*spin, {Filled(4, 1)});
  ASSERT_TRUE(first.ok() && second.ok());
  auto third = a->Submit(*spin, {Filled(4, 1)});
  ASSERT_THAT(third, IsOk()) << "submissions stream: the refusal comes back from Wait";
  auto refused = third->Wait(10s);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kResourceExhausted) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find(
                QuotaMessage(a->id(), "runs_in_flight", " on island island0", "runs", 2, 1, 2)),
            std::string::npos)
      << refused.status().ToString();
  auto error = events.WaitFor(
      "error.scheduler", [](const Event& e) { return e.fields["code"] == "ResourceExhausted"; },
      10s);
  EXPECT_TRUE(error.has_value()) << "no error.scheduler event for the refusal";

  // Another client has a quota of its own: it runs two at once meanwhile, on its device.
  auto other_slice = b->CreateSlice(1);
  ASSERT_THAT(other_slice, IsOk());
  auto doubling = Doubling(*b, *other_slice, 4);
  ASSERT_THAT(doubling, IsOk());
  auto b_first = b->Submit(*doubling, {Filled(4, 1)});
  auto b_second = b->Submit(*doubling, {Filled(4, 1)});
  ASSERT_TRUE(b_first.ok() && b_second.ok());
  for (atl::Run* run : {&*b_first, &*b_second}) {
    auto out = run->Wait(30s);
    ASSERT_THAT(out, IsOk());
  }

  // A cancelled run gives its place back.
  ASSERT_THAT(first->Cancel(), IsOk());
  auto fourth = SubmitOnceAccepted(*a, *spin);
  ASSERT_THAT(fourth, IsOk());
  EXPECT_THAT(second->Cancel(), IsOk());
  EXPECT_THAT(fourth->Cancel(), IsOk());
}

}  // namespace
}  // namespace atl::testing
