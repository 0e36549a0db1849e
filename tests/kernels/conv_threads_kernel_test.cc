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

TEST(ConvThreadsKernelTest, OneDnnRunsOnTheCallersShareOfTheCores) {
  std::mt19937 rng(7);
  const Tensor x = testutil::RandomF32(rng, {1, 3, 9, 7});
  const Tensor k = testutil::RandomF32(rng, {4, 3, 3, 3});
  const ConvDims dims = testutil::Conv3x3Dims();
  const std::vector<double> want = testutil::RefConv3x3(x, k);
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

}  // namespace
}  // namespace atl::kernels
