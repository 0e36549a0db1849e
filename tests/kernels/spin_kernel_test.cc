// kernels::Spin: busy (not asleep) for the time asked, and refusing times it cannot honour.
#include "kernels/spin.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <limits>
#include <random>

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

TEST(SpinKernelTest, BadTimesAreInvalidArgument) {
  const Tensor t(DType::kF32, {1});
  for (double bad :
       {-1.0, std::nan(""), std::numeric_limits<double>::infinity(), kMaxSpinMicros * 2}) {
    EXPECT_EQ(Spin(t, bad).status().code(), Code::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace atl::kernels
