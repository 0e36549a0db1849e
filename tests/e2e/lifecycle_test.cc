// A run's lifecycle end to end: the runs a futures loop reads are released once read, so
// memory stays flat over thousands of steps; Run::Cancel stops a running spin at once and
// frees its objects and devices; and a load of many clients (collectives, futures chains,
// cross-island chains, a cancel) makes no service publish an `error.` event: every object
// is released exactly once, and nothing asked for is reported as a fault.
#include <atomic>
#include <deque>
#include <iostream>
#include <optional>
#include <set>
#include <thread>

#include "common/net/events.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/event_recorder.h"
#include "tests/e2e/member_context.h"
#include "tests/e2e/one_call_program.h"
#include "tests/e2e/store_stats.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

Value Inc(FunctionBuilder& b, Value x) { return b.Add(x, 1.0); }

// A spin far longer than any test waits: whatever ends it early was cancelled.
constexpr double kLongSpinUs = 60e6;
constexpr auto kLongSpin = std::chrono::microseconds(static_cast<int64_t>(kLongSpinUs));
Value LongSpin(FunctionBuilder& b, Value x) { return b.Spin(x, kLongSpinUs); }
Value SumInc(FunctionBuilder& b, Value x) { return b.Add(b.AllReduceSum(x), 1.0); }

// Every release `client` sent met its object (a release sent twice, or for an object never
// made, would stay a tombstone until the client goes). Waits (bounded) for the outputs of
// dropped or cancelled runs to be made, which consumes their tombstones.
Status NoTombstonesLeft(const std::string& rm, const Client& client) {
  MemberContext context;
  const auto deadline = Clock::now() + 10s;
  uint64_t left = 0;
  while (Clock::now() < deadline) {
    left = TombstonesOf(StoreStatsByHost(context, rm), client.id());
    if (left == 0) return Status::Ok();
    std::this_thread::sleep_for(5ms);
  }
  return Internal("client " + std::to_string(client.id()) + " left " + std::to_string(left) +
                  " releases that met no object");
}

class LifecycleTest : public ClusterTest {
 protected:
  // The client's objects in every store once they came down to `want` (read in a bounded
  // wait: the last RunDone notices are read by `last->Wait` when given, the stores free
  // what they release on their own loop), or what they are at the end of it.
  uint64_t SettledObjects(Client& client, atl::Run* last, uint64_t want) {
    const auto deadline = Clock::now() + 10s;
    uint64_t held = 0;
    while (true) {
      if (last != nullptr) {
        EXPECT_THAT(last->Wait(30s), IsOk());
      }
      held = ObjectsOf(StoreStatsByHost(context_, RmEndpoint()), client.id());
      if (held == want || Clock::now() > deadline) return held;
      std::this_thread::sleep_for(5ms);
    }
  }
  uint64_t AllObjects() {
    uint64_t n = 0;
    for (const auto& [host, stats] : StoreStatsByHost(context_, RmEndpoint())) n += stats.objects;
    return n;
  }

  MemberContext context_;
};

TEST_F(LifecycleTest, AFuturesLoopHoldsOnlyItsLastStepsObjects) {
  constexpr int kSteps = 10000;
  constexpr int kReadEvery = 100;  // a training loop reads its loss now and then
  auto client = Connect("futures-loop");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateSlice(1, "island0");
  ASSERT_THAT(slice, IsOk());
  auto inc = OneCall(*client, *slice, "inc", Inc);
  ASSERT_THAT(inc, IsOk());

  const auto start = Clock::now();
  auto first = client->Submit(*inc, {Tensor::F32({2}, {0, 1})});
  ASSERT_THAT(first, IsOk());
  atl::Run run = std::move(first).value();
  // Settled, the client holds the last run's result alone: one object on one device.
  uint64_t after_ten = 0;
  uint64_t all_after_ten = 0;
  for (int step = 2; step <= kSteps; ++step) {
    auto next = client->Submit(*inc, {run.Output(0)});
    ASSERT_THAT(next, IsOk()) << "step " << step << ": " << next.status().ToString();
    run = std::move(next).value();
    if (step % kReadEvery == 0) {
      ASSERT_THAT(run.Wait(60s), IsOk()) << "step " << step;
    }
    if (step == 10) {
      after_ten = SettledObjects(*client, &run, 1);
      all_after_ten = AllObjects();
    }
  }
  auto out = run.Wait(60s);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->at(0), Tensor::F32({2}, {kSteps, kSteps + 1}));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::cout << kSteps << " steps in " << seconds << " s\n";
  RecordProperty("seconds", std::to_string(seconds));

  EXPECT_EQ(after_ten, 1u);
  EXPECT_THAT(NoTombstonesLeft(RmEndpoint(), *client), IsOk());
  EXPECT_EQ(SettledObjects(*client, &run, 1), after_ten);
  EXPECT_EQ(AllObjects(), all_after_ten);
}

TEST_F(LifecycleTest, CancelStopsARunningSpinFreesItsObjectsAndItsDevicesGoOnAtOnce) {
  auto client = Connect("cancel");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateSlice(2, "island1");
  ASSERT_THAT(slice, IsOk());
  auto spin = OneCall(*client, *slice, "spin", LongSpin);
  auto inc = OneCall(*client, *slice, "inc", Inc);
  ASSERT_TRUE(spin.ok() && inc.ok());
  const uint64_t before = ObjectsOf(StoreStatsByHost(context_, RmEndpoint()), client->id());
  EventRecorder events(EventsEndpoint());

  auto spinning = client->Submit(*spin, {Tensor::F32({2}, {1, 2})});
  ASSERT_THAT(spinning, IsOk());
  // A run that reads its future, queued behind it on the same devices.
  std::optional<atl::Run> reader = client->Submit(*inc, {spinning->Output(0)}).value();
  // The spin is under way: its result is not there a while later.
  EXPECT_EQ(spinning->Wait(0, 500ms).status().code(), Code::kDeadlineExceeded);

  const auto cancelled_at = Clock::now();
  ASSERT_THAT(spinning->Cancel(), IsOk());
  auto waited = spinning->Wait(30s);
  EXPECT_EQ(waited.status().code(), Code::kCancelled) << waited.status().ToString();
  EXPECT_LT(Clock::now() - cancelled_at, 1s) << "Wait on a cancelled run returns at once";
  EXPECT_THAT(spinning->Cancel(), IsOk()) << "cancelling again does nothing";
  auto read = reader->Wait(30s);
  EXPECT_EQ(read.status().code(), Code::kCancelled) << read.status().ToString();
  EXPECT_LT(Clock::now() - cancelled_at, kLongSpin / 10);
  auto late = client->Submit(*inc, {spinning->Output(0)});
  EXPECT_EQ(late.status().code(), Code::kCancelled) << late.status().ToString();

  // Both shards were stopped inside their spin, not dropped from a queue.
  const auto stopped = events.Collect(spinning->id(), [](const std::vector<Event>& got) {
    return std::count_if(got.begin(), got.end(),
                         [](const Event& e) { return e.topic == "gang.cancelled"; }) == 2;
  });
  int cancelled_shards = 0;
  for (const auto& e : stopped) {
    if (e.topic != "gang.cancelled") continue;
    ++cancelled_shards;
    EXPECT_NE(e.fields["why"].get<std::string>().find("spin cancelled after"), std::string::npos)
        << e.fields.dump();
  }
  EXPECT_EQ(cancelled_shards, 2);

  // Its devices run the next program at once, far sooner than the spin would have ended.
  auto submitted = client->Submit(*inc, {Tensor::F32({2}, {1, 2})});
  ASSERT_THAT(submitted, IsOk());
  std::optional<atl::Run> next = std::move(submitted).value();
  auto out = next->Wait(30s);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->at(0), Tensor::F32({2}, {2, 3}));
  EXPECT_LT(Clock::now() - cancelled_at, kLongSpin / 4);

  // Every object of the cancelled run, its reader and the next run is freed once their
  // handles are gone (the cancelled run's, at its cancel).
  reader.reset();
  next.reset();
  EXPECT_EQ(SettledObjects(*client, nullptr, before), before) << "objects are left";
  Status matched = NoTombstonesLeft(RmEndpoint(), *client);
  EXPECT_THAT(matched, IsOk());
}

TEST_F(LifecycleTest, AClientThatLeavesMidSpinHasItsRunningWorkStopped) {
  auto leaving = Connect("leaving");
  ASSERT_NE(leaving, nullptr);
  auto slice = leaving->CreateSlice(2, "island1");
  ASSERT_THAT(slice, IsOk());
  auto spin = OneCall(*leaving, *slice, "spin", LongSpin);
  ASSERT_THAT(spin, IsOk());
  EventRecorder events(EventsEndpoint());
  auto submitted = leaving->Submit(*spin, {Tensor::F32({2}, {1, 2})});
  ASSERT_THAT(submitted, IsOk());
  std::optional<atl::Run> spinning = std::move(submitted).value();
  const uint64_t run = spinning->id();
  // Both shards reached their executors (a gang not dispatched yet is dropped by the
  // scheduler, and has no executor to report it cancelled).
  auto admitted_shards = [](const std::vector<Event>& got) {
    uint64_t shards = 0;
    for (const Event& e : got) {
      if (e.topic == "dispatch.admitted") shards += e.fields["entries"].get<uint64_t>();
    }
    return shards;
  };
  ASSERT_EQ(admitted_shards(events.Collect(
                run, [&](const std::vector<Event>& got) { return admitted_shards(got) == 2; })),
            2u);

  // It says goodbye with the spin under way; its island's devices are all another
  // client's next, and run its program at once.
  const auto left_at = Clock::now();
  spinning.reset();
  leaving.reset();
  auto staying = Connect("staying");
  ASSERT_NE(staying, nullptr);
  auto all = staying->CreateSlice(4, "island1");
  ASSERT_THAT(all, IsOk());
  auto inc = OneCall(*staying, *all, "inc", Inc);
  ASSERT_THAT(inc, IsOk());
  auto next = staying->Submit(*inc, {Tensor::F32({2}, {1, 2})});
  ASSERT_THAT(next, IsOk());
  auto out = next->Wait(30s);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->at(0), Tensor::F32({2}, {2, 3}));
  EXPECT_LT(Clock::now() - left_at, kLongSpin / 4);
  // Both shards were stopped: inside their spin, or before it began (the next program's
  // quick completion above shows that no spin ran on).
  const auto stopped = events.Collect(run, [](const std::vector<Event>& got) {
    return std::count_if(got.begin(), got.end(),
                         [](const Event& e) { return e.topic == "gang.cancelled"; }) == 2;
  });
  EXPECT_EQ(std::count_if(stopped.begin(), stopped.end(),
                          [](const Event& e) { return e.topic == "gang.cancelled"; }),
            2)
      << EventRecorder::Describe(stopped);
}

// ---------------------------------------------------------------------------------------
// No fault, no error event.

constexpr int kLoadRuns = 30;
constexpr size_t kRunsInFlight = 4;

// Runs `submit` kLoadRuns times, kRunsInFlight at a time, checking each result with `check`.
Status RunMany(const std::function<Result<Run>(int)>& submit,
               const std::function<Status(int, const Tensor&)>& check) {
  std::deque<std::pair<Run, int>> in_flight;
  auto check_oldest = [&]() -> Status {
    auto [run, index] = std::move(in_flight.front());
    in_flight.pop_front();
    ATOLL_ASSIGN_OR_RETURN(std::vector<Tensor> out, run.Wait(60s));
    return check(index, out.at(0));
  };
  for (int r = 0; r < kLoadRuns; ++r) {
    ATOLL_ASSIGN_OR_RETURN(Run run, submit(r));
    in_flight.emplace_back(std::move(run), r);
    if (in_flight.size() == kRunsInFlight) ATOLL_RETURN_IF_ERROR(check_oldest());
  }
  while (!in_flight.empty()) ATOLL_RETURN_IF_ERROR(check_oldest());
  return Status::Ok();
}

Status Expect(const Tensor& got, const Tensor& want) {
  return got == want ? Status::Ok() : Internal(got.ToString() + ", not " + want.ToString());
}

// All-reduces on a 2-device slice.
Status AllReduceLoad(const std::string& rm, int index) {
  ATOLL_ASSIGN_OR_RETURN(auto client, Client::Connect({.rm_endpoint = rm, .name = "allreduce"}));
  ATOLL_ASSIGN_OR_RETURN(Slice slice, client->CreateSlice(2, index % 2 ? "island1" : "island0"));
  ATOLL_ASSIGN_OR_RETURN(Program step, OneCall(*client, slice, "sum_inc", SumInc));
  ATOLL_RETURN_IF_ERROR(RunMany(
      [&](int r) {
        return client->Submit(step, {Tensor::F32({2}, {float(r), 1})});
      },
      [](int r, const Tensor& out) {
        return Expect(out, Tensor::F32({2}, {2.0f * r + 1, 3}));
      }));
  return NoTombstonesLeft(rm, *client);
}

// A chain of futures whose Run handles are dropped as it grows (their gangs still queued),
// with a long spin cancelled in the middle.
Status FuturesLoad(const std::string& rm, int index) {
  ATOLL_ASSIGN_OR_RETURN(auto client, Client::Connect({.rm_endpoint = rm, .name = "chain"}));
  ATOLL_ASSIGN_OR_RETURN(Slice slice, client->CreateSlice(2, index % 2 ? "island0" : "island1"));
  ATOLL_ASSIGN_OR_RETURN(Program inc, OneCall(*client, slice, "inc", Inc));
  ATOLL_ASSIGN_OR_RETURN(
      Program spin,
      OneCall(*client, slice, "spin", [](FunctionBuilder& b, Value x) { return b.Spin(x, 30e6); }));
  ATOLL_ASSIGN_OR_RETURN(Run run, client->Submit(inc, {Tensor::F32({2}, {0, 0})}));
  for (int step = 1; step < 3 * kLoadRuns; ++step) {
    if (step == kLoadRuns) {
      ATOLL_ASSIGN_OR_RETURN(Run doomed, client->Submit(spin, {Tensor::F32({2}, {0, 0})}));
      ATOLL_RETURN_IF_ERROR(doomed.Cancel());
    }
    ATOLL_ASSIGN_OR_RETURN(run, client->Submit(inc, {run.Output(0)}));
  }
  ATOLL_ASSIGN_OR_RETURN(std::vector<Tensor> out, run.Wait(60s));
  ATOLL_RETURN_IF_ERROR(Expect(out.at(0), Tensor::F32({2}, {3.0f * kLoadRuns, 3.0f * kLoadRuns})));
  return NoTombstonesLeft(rm, *client);
}

// island0 -> island1 -> island0 (or the other way) over 4-device slices: two devices of
// each host, so that every store holds two shards of each object.
Status CrossIslandLoad(const std::string& rm, int index) {
  ATOLL_ASSIGN_OR_RETURN(auto client, Client::Connect({.rm_endpoint = rm, .name = "cross"}));
  ATOLL_ASSIGN_OR_RETURN(Slice on0, client->CreateSlice(4, "island0"));
  ATOLL_ASSIGN_OR_RETURN(Slice on1, client->CreateSlice(4, "island1"));
  auto step = [&](const Slice& slice) -> Result<Function> {
    FunctionBuilder b("step");
    b.Output(SumInc(b, b.Input(DType::kF32, {2}, Sharding::Replicated())));
    return client->Register(b, slice);
  };
  ATOLL_ASSIGN_OR_RETURN(Function first, step(index % 2 ? on1 : on0));
  ATOLL_ASSIGN_OR_RETURN(Function second, step(index % 2 ? on0 : on1));
  ProgramBuilder p;
  Traced x = p.Arg(DType::kF32, {2});
  x = p.Call(first, {x})[0];
  x = p.Call(second, {x})[0];
  x = p.Call(first, {x})[0];
  p.Return({x});
  ATOLL_ASSIGN_OR_RETURN(Program crossing, p.Build());
  ATOLL_RETURN_IF_ERROR(RunMany(
      [&](int r) {
        return client->Submit(crossing, {Tensor::F32({2}, {float(r), 0})});
      },
      [](int r, const Tensor& out) {
        auto f = [](float v) { return ((v * 4 + 1) * 4 + 1) * 4 + 1; };
        return Expect(out, Tensor::F32({2}, {f(float(r)), f(0)}));
      }));
  return NoTombstonesLeft(rm, *client);
}

TEST_F(LifecycleTest, ALoadOfClientsPublishesNoErrorEvent) {
  EventRecorder events(EventsEndpoint());
  using Load = Status (*)(const std::string&, int);
  const std::vector<std::pair<std::string, Load>> loads = {
      {"all-reduce", AllReduceLoad}, {"futures", FuturesLoad}, {"cross-island", CrossIslandLoad}};
  constexpr int kClientsPerLoad = 2;
  std::vector<Status> outcomes(loads.size() * kClientsPerLoad);
  std::atomic<size_t> running{outcomes.size()};
  std::vector<std::thread> clients;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    clients.emplace_back([&, i] {
      outcomes[i] = loads[i % loads.size()].second(RmEndpoint(), static_cast<int>(i));
      running--;
    });
  }
  std::vector<Event> errors;
  std::set<std::string> services;  // the services heard from
  auto record = [&](const Event& e) {
    if (e.topic.rfind("error.", 0) == 0) errors.push_back(e);
    const std::string src = e.fields.value("src", "");
    if (src.rfind("executor/", 0) == 0 || src.rfind("objectstore/", 0) == 0 ||
        src.rfind("scheduler/", 0) == 0) {
      services.insert(src);
    }
  };
  // Read while the load runs, so that no event is dropped for want of a reader.
  while (running > 0) {
    if (auto e = events.Next(100ms)) record(*e);
  }
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < outcomes.size(); ++i) {
    EXPECT_THAT(outcomes[i], IsOk())
        << loads[i % loads.size()].first << " client " << i << ": " << outcomes[i].ToString();
  }

  // Settled: every service published something after the load ended (each publishes its
  // statistics every heartbeat), so whatever the load made it publish has arrived.
  const int64_t ended_us = NowMicros();
  std::set<std::string> since;
  const auto deadline = Clock::now() + 10s;
  while (since != services && Clock::now() < deadline) {
    auto e = events.Next(100ms);
    if (!e) continue;
    record(*e);
    const std::string src = e->fields.value("src", "");
    if (services.count(src) && e->fields.value("ts_us", int64_t{0}) > ended_us) since.insert(src);
  }
  EXPECT_EQ(since, services) << "some service published nothing after the load";
  EXPECT_GE(services.size(), 10u) << "4 executors, 4 stores and 2 schedulers";
  for (const auto& e : errors) ADD_FAILURE() << FormatEventLine(e);
}

}  // namespace
}  // namespace atl::testing
