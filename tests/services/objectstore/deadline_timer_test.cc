#include "services/objectstore/deadline_timer.h"

#include <poll.h>

#include <gtest/gtest.h>
#include "tests/status_matchers.h"

namespace atl::store {
namespace {

using namespace std::chrono_literals;

// Waits at most `within` for the timer's fd to become readable.
bool Fires(const DeadlineTimer& timer, std::chrono::milliseconds within) {
  pollfd item{timer.fd(), POLLIN, 0};
  return poll(&item, 1, static_cast<int>(within.count())) == 1;
}

TEST(DeadlineTimerTest, FiresAtTheDeadlineNotBefore) {
  auto timer = DeadlineTimer::Create();
  ASSERT_THAT(timer, IsOk());
  const auto start = std::chrono::steady_clock::now();
  timer->ArmAt(start + 30ms);
  ASSERT_TRUE(Fires(*timer, 5000ms));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms);
  timer->Drain();
  EXPECT_FALSE(Fires(*timer, 0ms));  // one-shot
}

TEST(DeadlineTimerTest, PastDeadlineFiresAtOnceAndClearDisarms) {
  auto timer = DeadlineTimer::Create();
  ASSERT_THAT(timer, IsOk());
  timer->ArmAt(std::chrono::steady_clock::now() - 1s);
  EXPECT_TRUE(Fires(*timer, 5000ms));
  timer->Drain();
  timer->ArmAt(std::chrono::steady_clock::now() + 20ms);
  timer->Clear();
  EXPECT_FALSE(Fires(*timer, 60ms));
}

TEST(DeadlineTimerTest, RearmingReplacesTheEarlierDeadline) {
  auto timer = DeadlineTimer::Create();
  ASSERT_THAT(timer, IsOk());
  timer->ArmAt(std::chrono::steady_clock::now() + 10s);
  timer->ArmAt(std::chrono::steady_clock::now() + 10ms);
  EXPECT_TRUE(Fires(*timer, 5000ms));
}

}  // namespace
}  // namespace atl::store
