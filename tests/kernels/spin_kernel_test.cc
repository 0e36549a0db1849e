// kernels::Spin: busy (not asleep) for the time asked, and refusing times it cannot honour.
#include "kernels/spin.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <limits>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

using testutil::RandomF32;

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

TEST(SpinKernelTest, ZeroReturnsTheInputAtOnce) {
  const Tensor t = Tensor::I32({2}, {4, 5});
  const auto start = std::chrono::steady_clock::now();
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor out, Spin(t, 0));
  EXPECT_EQ(out, t);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
}

TEST(SpinKernelTest, KeepsTheThreadBusyForTheGivenTime) {
  std::mt19937 rng(4);
  const Tensor t = RandomF32(rng, {3, 5});
  const double cpu_start = ThreadCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor out, Spin(t, 20000));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(out, t);
  EXPECT_GE(elapsed, std::chrono::milliseconds(20));
  // Busy, not asleep: the thread burnt CPU (loosely bounded: a loaded machine preempts it).
  EXPECT_GE(ThreadCpuSeconds() - cpu_start, 0.002);
}

TEST(SpinKernelTest, ACancelledSpinStopsWithinItsCheckInterval) {
  const Tensor t = Tensor::I32({1}, {4});
  std::atomic<bool> cancelled{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    cancelled = true;
  });
  const auto start = std::chrono::steady_clock::now();
  auto out = Spin(t, 60e6, &cancelled);
  const auto took = std::chrono::steady_clock::now() - start;
  canceller.join();
  EXPECT_EQ(out.status().code(), Code::kCancelled);
  EXPECT_NE(out.status().message().find("spin cancelled after"), std::string::npos)
      << out.status().message();
  // Loosely bounded: a loaded machine preempts threads, but never for a minute.
  EXPECT_LT(took, std::chrono::seconds(6));
}

TEST(SpinKernelTest, BadTimesAreInvalidArgument) {
  const Tensor t(DType::kF32, {1});
  for (double bad :
       {-1.0, std::nan(""), std::numeric_limits<double>::infinity(), kMaxSpinMicros * 2}) {
    EXPECT_EQ(Spin(t, bad).status().code(), Code::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace atl::kernels
