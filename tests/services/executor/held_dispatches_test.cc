// HeldDispatches: dispatches naming functions the RM is still to compile here wait, in
// arrival order and bounded, for their Compile.
#include "services/executor/held_dispatches.h"

#include <set>

#include <gtest/gtest.h>

#include "common/proto/codec.h"
#include "tests/status_matchers.h"

namespace atl::executor {
namespace {

constexpr int64_t kWaitUs = 1000;
constexpr uint64_t kMaxBytes = 1000;

proto::Dispatch OneEntry(uint64_t run, uint64_t function) {
  proto::Entry e;
  e.run_id = run;
  e.gang_seq = run;
  e.function_id = function;
  return {{e}};
}

std::vector<uint64_t> Runs(const std::vector<HeldDispatches::Held>& held) {
  std::vector<uint64_t> runs;
  for (const auto& h : held) runs.push_back(h.dispatch.entries.at(0).run_id);
  return runs;
}

TEST(HeldDispatchesTest, ADispatchIsHeldOnlyWhenAnEntryIsToRunAFunctionStillComing) {
  HeldDispatches held(kMaxBytes);
  held.Expect({2, 3}, kWaitUs);
  auto compiled = [](uint64_t f) { return f == 3; };
  EXPECT_FALSE(held.MustHold(OneEntry(1, 1), compiled, 0)) << "function 1 is not coming";
  EXPECT_TRUE(held.MustHold(OneEntry(1, 2), compiled, 0));
  EXPECT_FALSE(held.MustHold(OneEntry(1, 3), compiled, 0)) << "function 3 came already";
  proto::Dispatch given_up = OneEntry(1, 2);
  given_up.entries[0].error_code = static_cast<int32_t>(Code::kCancelled);
  EXPECT_FALSE(held.MustHold(given_up, compiled, 0)) << "it runs nothing: nothing to wait for";
}

TEST(HeldDispatchesTest, ACompileReleasesTheHeldDispatchAndThoseBehindItInOrder) {
  std::set<uint64_t> compiled_here;
  auto compiled = [&](uint64_t f) { return compiled_here.count(f) != 0; };
  HeldDispatches held(kMaxBytes);
  held.Expect({2, 3}, kWaitUs);
  ASSERT_THAT(held.Add(OneEntry(10, 2), "s"), IsOk());
  EXPECT_TRUE(held.MustHold(OneEntry(11, 1), compiled, 5)) << "behind the held one";
  ASSERT_THAT(held.Add(OneEntry(11, 1), "s"), IsOk());
  ASSERT_THAT(held.Add(OneEntry(12, 3), "t"), IsOk());
  EXPECT_TRUE(held.TakeReady(compiled, 10).empty()) << "function 2 is not compiled yet";
  compiled_here.insert(2);
  auto ready = held.TakeReady(compiled, 20);
  EXPECT_EQ(Runs(ready), (std::vector<uint64_t>{10, 11}));
  EXPECT_EQ(ready[0].scheduler, "s");
  EXPECT_EQ(held.size(), 1u) << "function 3 is still unknown";
  compiled_here.insert(3);
  ready = held.TakeReady(compiled, 30);
  EXPECT_EQ(Runs(ready), (std::vector<uint64_t>{12}));
  EXPECT_EQ(ready[0].scheduler, "t");
  EXPECT_TRUE(held.empty());
}

TEST(HeldDispatchesTest, DispatchesLeaveWhenTheWaitIsOverEvenIfTheirFunctionNeverCame) {
  auto compiled = [](uint64_t) { return false; };
  HeldDispatches held(kMaxBytes);
  held.Expect({2}, kWaitUs);
  ASSERT_THAT(held.Add(OneEntry(10, 2), "s"), IsOk());
  ASSERT_THAT(held.Add(OneEntry(11, 2), "s"), IsOk());
  EXPECT_TRUE(held.TakeReady(compiled, kWaitUs - 1).empty()) << "left before the wait was over";
  EXPECT_EQ(Runs(held.TakeReady(compiled, kWaitUs)), (std::vector<uint64_t>{10, 11}));
  EXPECT_FALSE(held.MustHold(OneEntry(12, 2), compiled, kWaitUs + 1))
      << "a function that did not come in time is not waited for again";
}

TEST(HeldDispatchesTest, ACancelledRunsHeldEntriesCarryTheCancelAndNeedNoFunction) {
  auto compiled = [](uint64_t) { return false; };
  HeldDispatches held(kMaxBytes);
  held.Expect({2}, kWaitUs);
  proto::Dispatch two = OneEntry(10, 2);
  two.entries.push_back(two.entries[0]);
  two.entries[1].shard = 1;
  ASSERT_THAT(held.Add(std::move(two), "s"), IsOk());
  ASSERT_THAT(held.Add(OneEntry(11, 2), "s"), IsOk());
  EXPECT_EQ(held.FailRun(10, Cancelled("run 10 was cancelled")), 2u);
  auto ready = held.TakeReady(compiled, 1);
  ASSERT_EQ(Runs(ready), (std::vector<uint64_t>{10})) << "run 11 still waits for function 2";
  for (const proto::Entry& e : ready[0].dispatch.entries) {
    const Status carried = proto::FromError({e.error_code, e.error});
    EXPECT_EQ(carried.code(), Code::kCancelled);
    EXPECT_EQ(carried.message(), "run 10 was cancelled");
  }
  EXPECT_EQ(held.FailRun(99, Cancelled("no such run")), 0u);
}

// One entry of `run` whose inline argument is `bytes` long.
proto::Dispatch WithArgument(uint64_t run, uint64_t function, size_t bytes) {
  proto::Dispatch d = OneEntry(run, function);
  proto::InputSource argument;
  argument.kind = proto::InputSource::kInline;
  argument.bytes.resize(bytes);
  d.entries[0].inputs.push_back(argument);
  return d;
}

TEST(HeldDispatchesTest, ArgumentsPastTheBoundAreGivenUpInTheirPlaceAndTheRestStillWait) {
  std::set<uint64_t> compiled_here;
  auto compiled = [&](uint64_t f) { return compiled_here.count(f) != 0; };
  HeldDispatches held(kMaxBytes);
  held.Expect({2}, kWaitUs);
  EXPECT_THAT(held.Add(WithArgument(10, 2, 600), "s"), IsOk());
  EXPECT_THAT(held.Add(WithArgument(11, 2, 400), "s"), IsOk()) << "exactly at the bound";
  const Status given_up = held.Add(WithArgument(12, 2, 1), "s");
  EXPECT_EQ(given_up.code(), Code::kResourceExhausted);
  EXPECT_NE(given_up.message().find("held_dispatch_bytes"), std::string::npos)
      << given_up.ToString();
  EXPECT_EQ(held.bytes(), kMaxBytes) << "the given-up one's value is dropped, not counted";
  EXPECT_TRUE(held.TakeReady(compiled, 1).empty()) << "still waiting for function 2";
  compiled_here.insert(2);
  auto ready = held.TakeReady(compiled, 2);
  ASSERT_EQ(Runs(ready), (std::vector<uint64_t>{10, 11, 12})) << "in arrival order";
  EXPECT_EQ(held.bytes(), 0u);
  EXPECT_EQ(ready[1].dispatch.entries[0].error_code, 0);
  EXPECT_EQ(ready[1].dispatch.entries[0].inputs[0].bytes.size(), 400u);
  const proto::Entry& dropped = ready[2].dispatch.entries[0];
  EXPECT_EQ(proto::FromError({dropped.error_code, dropped.error}).code(), Code::kResourceExhausted);
  EXPECT_TRUE(dropped.inputs[0].bytes.empty());
  EXPECT_THAT(held.Add(WithArgument(13, 2, kMaxBytes), "s"), IsOk()) << "room again once they left";
}

}  // namespace
}  // namespace atl::executor
