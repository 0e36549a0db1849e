// SpinCondition: waits end when the state is ready, spinning or asleep, and not before a
// timeout when it never is.
#include "common/base/spin_condition.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

namespace atl {
namespace {

using namespace std::chrono_literals;

TEST(SpinConditionTest, ReadyStateReturnsAtOnce) {
  SpinCondition cv(std::chrono::microseconds(50));
  std::mutex mu;
  std::unique_lock lock(mu);
  EXPECT_TRUE(cv.WaitFor(lock, 0s, [] { return true; }));
  EXPECT_TRUE(lock.owns_lock());
}

TEST(SpinConditionTest, TimesOutWhenNeverReady) {
  for (auto spin : {0us, 50us, 5000us}) {
    SpinCondition cv(spin);
    std::mutex mu;
    std::unique_lock lock(mu);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(cv.WaitFor(lock, 20ms, [] { return false; })) << spin.count();
    EXPECT_GE(std::chrono::steady_clock::now() - start, 20ms) << spin.count();
    EXPECT_TRUE(lock.owns_lock());
  }
}

// A notification reaches the waiter both while it spins and once it sleeps.
TEST(SpinConditionTest, WakesOnANotificationWhileSpinningOrAsleep) {
  for (std::chrono::microseconds spin : {0us, 1000000us}) {
    SpinCondition cv(spin);
    std::mutex mu;
    bool ready = false;
    std::thread notifier([&] {
      std::this_thread::sleep_for(5ms);
      {
        std::lock_guard lock(mu);
        ready = true;
      }
      cv.NotifyAll();
    });
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.WaitFor(lock, 30s, [&] { return ready; })) << spin.count();
    lock.unlock();
    notifier.join();
  }
}

TEST(SpinConditionTest, UnboundedWaitReturnsOnceReady) {
  SpinCondition cv(std::chrono::microseconds(50));
  std::mutex mu;
  int value = 0;
  std::thread setter([&] {
    for (int i = 1; i <= 3; ++i) {
      {
        std::lock_guard lock(mu);
        value = i;
      }
      cv.NotifyAll();
    }
  });
  std::unique_lock lock(mu);
  cv.Wait(lock, [&] { return value == 3; });
  EXPECT_EQ(value, 3);
  lock.unlock();
  setter.join();
}

}  // namespace
}  // namespace atl
