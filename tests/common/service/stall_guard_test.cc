#include "common/service/stall_guard.h"

#include <gtest/gtest.h>

namespace atl {
namespace {

using std::chrono::milliseconds;
using Clock = StallGuard::Clock;

constexpr milliseconds kCheck{125};

const Clock::time_point kStart{std::chrono::hours(1)};

// Checks every 125 ms of a 500 ms heartbeat, from kStart; a silence of 4 periods (2 s) is a
// loss.
StallGuard Guard() { return StallGuard("test", kCheck, milliseconds(500), 4, kStart); }

// Checks on time from `from` on: how long after `from` the first one that may judge came.
milliseconds FirstJudgingCheck(StallGuard& guard, Clock::time_point from) {
  for (milliseconds after{0}; after < milliseconds(60000); after += kCheck) {
    if (guard.MayJudge(from + after)) return after;
  }
  return milliseconds(-1);
}

TEST(StallGuardTest, ChecksOnTimeMayJudge) {
  StallGuard guard = Guard();
  const Clock::time_point t = kStart + kCheck;
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(guard.MayJudge(t + i * kCheck)) << i;
  // Late, by less than a heartbeat period: a busy turn, not a stall.
  EXPECT_TRUE(guard.MayJudge(t + 9 * kCheck + milliseconds(600)));
}

TEST(StallGuardTest, AStallBeforeTheFirstCheckCounts) {
  StallGuard guard = Guard();
  EXPECT_EQ(FirstJudgingCheck(guard, kStart + milliseconds(3000)), milliseconds(2000));
}

TEST(StallGuardTest, ACheckAPeriodLateJudgesNothingForALapse) {
  StallGuard guard = Guard();
  const Clock::time_point t = kStart + kCheck;
  EXPECT_TRUE(guard.MayJudge(t));
  // The judge did not run for 3 s: the checks after it wait out a lapse.
  EXPECT_EQ(FirstJudgingCheck(guard, t + milliseconds(3000)), milliseconds(2000));
}

TEST(StallGuardTest, QuietUntilHoldsJudgingAndAStallWithinItOnlyExtendsIt) {
  StallGuard guard = Guard();
  const Clock::time_point t = kStart + kCheck;
  guard.QuietUntil(t + milliseconds(5000));  // a restarted RM's grace
  EXPECT_EQ(FirstJudgingCheck(guard, t), milliseconds(5000));

  StallGuard stalled = Guard();
  stalled.QuietUntil(t + milliseconds(5000));
  EXPECT_FALSE(stalled.MayJudge(t));
  // A stall ending 1 s in adds a lapse from there, which ends within the grace.
  EXPECT_EQ(FirstJudgingCheck(stalled, t + milliseconds(1000)), milliseconds(4000));
  // One ending 4 s in carries judging past the grace.
  StallGuard late = Guard();
  late.QuietUntil(t + milliseconds(5000));
  EXPECT_FALSE(late.MayJudge(t));
  EXPECT_EQ(FirstJudgingCheck(late, t + milliseconds(4000)), milliseconds(2000));
}

}  // namespace
}  // namespace atl
