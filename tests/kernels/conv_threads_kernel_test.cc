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
#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

// x [1, c, h, w] by k [o, c, 3, 3], stride 1, padding 1, in double.
std::vector<double> DirectConv(const Tensor& x, const Tensor& k) {
  const int64_t c = x.shape()[1], h = x.shape()[2], w = x.shape()[3], o = k.shape()[0];
  const std::vector<double> xs = x.ToDoubles(), ks = k.ToDoubles();
  std::vector<double> out(static_cast<size_t>(o * h * w), 0.0);
  for (int64_t f = 0; f < o; ++f) {
    for (int64_t i = 0; i < h; ++i) {
      for (int64_t j = 0; j < w; ++j) {
        double sum = 0;
        for (int64_t ch = 0; ch < c; ++ch) {
          for (int64_t di = 0; di < 3; ++di) {
            for (int64_t dj = 0; dj < 3; ++dj) {
              const int64_t y = i + di - 1, z = j + dj - 1;
              if (y < 0 || y >= h || z < 0 || z >= w) continue;
              sum += xs[static_cast<size_t>((ch * h + y) * w + z)] *
                     ks[static_cast<size_t>(((f * c + ch) * 3 + di) * 3 + dj)];
            }
          }
        }
        out[static_cast<size_t>((f * h + i) * w + j)] = sum;
      }
    }
  }
  return out;
}

// A random x [1, 3, 9, 7] and k [4, 3, 3, 3], DirectConv's convolution of them (stride 1,
// padding 1, NCHW and OIHW) and its result.
struct PaddedConv {
  Tensor x, k;
  ConvDims dims;
  std::vector<double> want;
};

PaddedConv DrawPaddedConv(unsigned seed) {
  std::mt19937 rng(seed);
  PaddedConv c{testutil::RandomF32(rng, {1, 3, 9, 7}),
               testutil::RandomF32(rng, {4, 3, 3, 3}),
               ConvDims{.strides = {1, 1},
                        .low = {1, 1},
                        .high = {1, 1},
                        .lhs_dilation = {1, 1},
                        .rhs_dilation = {1, 1},
                        .lhs_spec = {0, 1, 2, 3},
                        .rhs_spec = {0, 1, 2, 3},
                        .out_spec = {0, 1, 2, 3}},
               {}};
  c.want = DirectConv(c.x, c.k);
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
