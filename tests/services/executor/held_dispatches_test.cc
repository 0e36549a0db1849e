// HeldDispatches: dispatches naming functions the RM is still to compile here wait, in
// arrival order and bounded, for their Compile.
#include "services/executor/held_dispatches.h"

#include <set>

#include <gtest/gtest.h>

#include "common/proto/codec.h"

namespace atl::executor {
namespace {

constexpr int64_t kWaitUs = 1000;

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

TEST(HeldDispatchesTest, ADispatchNamesAComingFunctionOnlyWhenAnEntryIsToRunIt) {
  auto coming = [](uint64_t f) { return f == 2; };
  EXPECT_FALSE(NamesComingFunction(OneEntry(1, 1), coming));
  EXPECT_TRUE(NamesComingFunction(OneEntry(1, 2), coming));
  proto::Dispatch given_up = OneEntry(1, 2);
  given_up.entries[0].error_code = static_cast<int32_t>(Code::kCancelled);
  EXPECT_FALSE(NamesComingFunction(given_up, coming)) << "it runs nothing: nothing to wait for";
}

TEST(HeldDispatchesTest, ACompileReleasesTheHeldDispatchAndThoseBehindItInOrder) {
  std::set<uint64_t> still_coming{2, 3};
  auto coming = [&](uint64_t f) { return still_coming.count(f) != 0; };
  HeldDispatches held(kWaitUs);
  held.Add(OneEntry(10, 2), "s", 0);
  held.Add(OneEntry(11, 1), "s", 5);  // not coming, but behind the held one
  held.Add(OneEntry(12, 3), "t", 6);
  EXPECT_TRUE(held.TakeReady(coming, 10).empty()) << "function 2 is not compiled yet";
  still_coming.erase(2);
  auto ready = held.TakeReady(coming, 20);
  EXPECT_EQ(Runs(ready), (std::vector<uint64_t>{10, 11}));
  EXPECT_EQ(ready[0].scheduler, "s");
  EXPECT_EQ(held.size(), 1u) << "function 3 is still unknown";
  still_coming.erase(3);
  ready = held.TakeReady(coming, 30);
  EXPECT_EQ(Runs(ready), (std::vector<uint64_t>{12}));
  EXPECT_EQ(ready[0].scheduler, "t");
  EXPECT_TRUE(held.empty());
}

TEST(HeldDispatchesTest, ADispatchLeavesAfterItsWaitEvenIfItsFunctionNeverCame) {
  auto coming = [](uint64_t) { return true; };
  HeldDispatches held(kWaitUs);
  held.Add(OneEntry(10, 2), "s", 0);
  held.Add(OneEntry(11, 2), "s", 600);
  EXPECT_TRUE(held.TakeReady(coming, kWaitUs).empty()) << "left before its wait was over";
  EXPECT_EQ(Runs(held.TakeReady(coming, kWaitUs + 1)), (std::vector<uint64_t>{10}));
  EXPECT_EQ(Runs(held.TakeReady(coming, 600 + kWaitUs + 1)), (std::vector<uint64_t>{11}));
}

TEST(HeldDispatchesTest, ACancelledRunsHeldEntriesCarryTheCancelAndNeedNoFunction) {
  auto coming = [](uint64_t) { return true; };
  HeldDispatches held(kWaitUs);
  proto::Dispatch two = OneEntry(10, 2);
  two.entries.push_back(two.entries[0]);
  two.entries[1].shard = 1;
  held.Add(std::move(two), "s", 0);
  held.Add(OneEntry(11, 2), "s", 0);
  EXPECT_EQ(held.FailRun(10, Cancelled("run 10 was cancelled")), 2u);
  auto ready = held.TakeReady(coming, 1);
  ASSERT_EQ(Runs(ready), (std::vector<uint64_t>{10})) << "run 11 still waits for function 2";
  for (const proto::Entry& e : ready[0].dispatch.entries) {
    const Status carried = proto::FromError({e.error_code, e.error});
    EXPECT_EQ(carried.code(), Code::kCancelled);
    EXPECT_EQ(carried.message(), "run 10 was cancelled");
  }
  EXPECT_EQ(held.FailRun(99, Cancelled("no such run")), 0u);
}

}  // namespace
}  // namespace atl::executor
