// kernels/conv_onednn.cc under a device's share of the cores: oneDNN's OpenMP team is the
// calling thread's MatmulThreads (an executor's device), not every core, and the
// convolution is still right (against a direct loop in double).
#include <omp.h>

#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/lax.h"
#include "kernels/matmul_threads.h"
#include "tests/kernels/kernel_checks.h"
#include "tests/kernels/reference_ops.h"
#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

// A random x [1, 3, 9, 7] and k [4, 3, 3, 3], and their convolution (stride 1, padding 1,
// NCHW and OIHW) computed in double.
struct PaddedConv {
  Tensor x, k;
  ConvDims dims;
  std::vector<double> want;
};

PaddedConv DrawPaddedConv(unsigned seed) {
  std::mt19937 rng(seed);
  PaddedConv c{testutil::RandomF32(rng, {1, 3, 9, 7}),
               testutil::RandomF32(rng, {4, 3, 3, 3}),
               testutil::Conv3x3Dims(),
               {}};
  c.want = testutil::RefConv3x3(c.x, c.k);
  return c;
}

TEST(ConvThreadsKernelTest, OneDnnRunsOnTheCallersShareOfTheCores) {
  const auto [x, k, dims, want] = DrawPaddedConv(7);
  for (const int share : {0, 1, 2}) {
    std::optional<Tensor> got;
    int team_before = 0, team_after = 0;
    std::thread([&] {  // a fresh thread: OpenMP's count is per thread, as the share is
      SetMatmulThreads(share);
      team_before = omp_get_max_threads();
      Result<std::optional<Tensor>> out = ConvWithOneDnn(x, k, dims, {1, 4, 9, 7});
      if (out.ok()) got = *std::move(out);
      team_after = omp_get_max_threads();
    })
        .join();
    ASSERT_TRUE(got.has_value()) << "oneDNN took no f32 2-d convolution, share " << share;
    testutil::ExpectClose(*got, {1, 4, 9, 7}, want, 1e-4, 1e-5);
    // 0, a thread that is no device's: OpenMP's own default stays.
    EXPECT_EQ(team_after, share > 0 ? share : team_before) << "share " << share;
  }
}

// The devices of an executor run one cached oneDNN primitive at once (a batch cut over two
// devices of a host): with padding, the library's global scratchpad made them write over
// each other and crash. Each call now brings its own, and every thread gets the direct
// loop's result.
TEST(ConvThreadsKernelTest, DevicesRunOnePaddedConvolutionAtOnce) {
  const auto [x, k, dims, want] = DrawPaddedConv(11);
  constexpr int kDevices = 4, kCalls = 50;
  std::vector<std::vector<std::optional<Tensor>>> got(kDevices);
  std::vector<std::thread> devices;
  for (int d = 0; d < kDevices; ++d) {
    devices.emplace_back([&, d] {
      SetMatmulThreads(2);
      for (int i = 0; i < kCalls; ++i) {
        Result<std::optional<Tensor>> out = ConvWithOneDnn(x, k, dims, {1, 4, 9, 7});
        got[d].push_back(out.ok() ? *std::move(out) : std::nullopt);
      }
    });
  }
  for (std::thread& t : devices) t.join();
  for (int d = 0; d < kDevices; ++d) {
    for (int i = 0; i < kCalls; ++i) {
      ASSERT_TRUE(got[d][i].has_value()) << "device " << d << " call " << i;
      testutil::ExpectClose(*got[d][i], {1, 4, 9, 7}, want, 1e-4, 1e-5);
    }
  }
}

}  // namespace
}  // namespace atl::kernels
