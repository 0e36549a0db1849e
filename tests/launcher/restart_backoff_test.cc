// RestartBackoff against a fake clock: the delays double from `initial` up to `cap`, and a
// service that stayed up for `reset_after` starts over at `initial`.
#include "launcher/restart_backoff.h"

#include <gtest/gtest.h>

namespace atl {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class FakeClock {
 public:
  RestartBackoff::TimePoint now() const { return now_; }
  void Advance(milliseconds d) { now_ += d; }

 private:
  RestartBackoff::TimePoint now_{};
};

// The delay after a service that ran for `uptime` exits.
milliseconds CrashAfter(RestartBackoff& backoff, FakeClock& clock, milliseconds uptime) {
  const auto started = clock.now();
  clock.Advance(uptime);
  return backoff.OnExit(started, clock.now());
}

TEST(RestartBackoffTest, DoublesFromInitialUpToTheCap) {
  RestartBackoff backoff(
      {.initial = milliseconds(100), .cap = seconds(1), .reset_after = seconds(10)});
  FakeClock clock;
  std::vector<milliseconds> delays;
  for (int i = 0; i < 7; ++i) delays.push_back(CrashAfter(backoff, clock, milliseconds(5)));
  EXPECT_EQ(delays,
            (std::vector<milliseconds>{milliseconds(100), milliseconds(200), milliseconds(400),
                                       milliseconds(800), seconds(1), seconds(1), seconds(1)}));
}

TEST(RestartBackoffTest, DefaultsAreAHundredMillisecondsToTenSeconds) {
  RestartBackoff backoff;
  FakeClock clock;
  EXPECT_EQ(CrashAfter(backoff, clock, milliseconds(0)), milliseconds(100));
  milliseconds last{0};
  for (int i = 0; i < 20; ++i) last = CrashAfter(backoff, clock, milliseconds(0));
  EXPECT_EQ(last, seconds(10));
}

TEST(RestartBackoffTest, AServiceThatStayedUpStartsOverAtInitial) {
  RestartBackoff backoff(
      {.initial = milliseconds(100), .cap = seconds(10), .reset_after = seconds(10)});
  FakeClock clock;
  CrashAfter(backoff, clock, milliseconds(1));
  CrashAfter(backoff, clock, milliseconds(1));
  EXPECT_EQ(CrashAfter(backoff, clock, milliseconds(1)), milliseconds(400));
  // Up for just under the reset time: still crash-looping.
  EXPECT_EQ(CrashAfter(backoff, clock, milliseconds(9999)), milliseconds(800));
  // Up for the reset time: healthy, then crashed anew.
  EXPECT_EQ(CrashAfter(backoff, clock, seconds(10)), milliseconds(100));
  EXPECT_EQ(CrashAfter(backoff, clock, milliseconds(1)), milliseconds(200));
}

}  // namespace
}  // namespace atl
