// kernels/matmul_threads.h: the per-device share of the cores, the per-thread setting, and
// Matmul cut into blocks on the calling thread's helpers, alone and from several threads at
// once with every transpose (as an executor's devices multiply).
#include "kernels/matmul_threads.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/matmul.h"
#include "tests/kernels/kernel_checks.h"
#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

using testutil::ExpectClose;
using testutil::RandomF32;

// OpenBLAS at one thread for the test, as an executor runs it; restored afterwards for the
// other tests of this binary.
class MatmulThreadsKernelTest : public testing::Test {
 protected:
  void SetUp() override {
    saved_ = BlasThreads();
    SetBlasThreads(1);
  }
  void TearDown() override {
    SetBlasThreads(saved_);
    SetMatmulThreads(0);
  }

 private:
  int saved_ = 0;
};

// op(a) x op(b) in double.
std::vector<double> Reference(const Tensor& a, const Tensor& b, MatmulOptions o) {
  const int64_t m = a.shape()[o.transpose_a ? 1 : 0], k = a.shape()[o.transpose_a ? 0 : 1];
  const int64_t n = b.shape()[o.transpose_b ? 0 : 1];
  const std::vector<double> av = a.ToDoubles(), bv = b.ToDoubles();
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      const double x = o.transpose_a ? av[p * m + i] : av[i * k + p];
      for (int64_t j = 0; j < n; ++j)
        c[i * n + j] += x * (o.transpose_b ? bv[j * k + p] : bv[p * n + j]);
    }
  }
  return c;
}

struct Case {
  int64_t m, k, n;
  MatmulOptions options;
};

// Cut by rows (m >= n) and by columns, sides that are and are not multiples of the blocks'
// 16, every transpose.
std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const MatmulOptions o{.transpose_a = ta, .transpose_b = tb};
      cases.push_back({203, 71, 50, o});
      cases.push_back({40, 90, 301, o});
      cases.push_back({128, 128, 128, o});
    }
  }
  return cases;
}

TEST_F(MatmulThreadsKernelTest, CoresPerDeviceIsAnEvenShareOfAtLeastOne) {
  EXPECT_EQ(CoresPerDevice(16, 4), 4);
  EXPECT_EQ(CoresPerDevice(16, 1), 16);
  EXPECT_EQ(CoresPerDevice(7, 2), 3);
  EXPECT_EQ(CoresPerDevice(2, 4), 1);
  EXPECT_EQ(CoresPerDevice(1, 0), 1);
  const int cores = AvailableCores();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

TEST_F(MatmulThreadsKernelTest, SettingsAreTheCallersThreadsAndTheProcesss) {
  EXPECT_EQ(BlasThreads(), 1);
  EXPECT_EQ(MatmulThreads(), 0);
  SetMatmulThreads(3);
  EXPECT_EQ(MatmulThreads(), 3);
  int other = -1;
  std::thread([&] { other = MatmulThreads(); }).join();
  EXPECT_EQ(other, 0) << "another thread keeps its own setting";
  SetMatmulThreads(-2);
  EXPECT_EQ(MatmulThreads(), 0);
}

TEST_F(MatmulThreadsKernelTest, BlocksOnAnyNumberOfThreadsMatchTheReference) {
  std::mt19937 rng(71);
  for (const Case& c : Cases()) {
    const Tensor a = RandomF32(rng, c.options.transpose_a ? Shape{c.k, c.m} : Shape{c.m, c.k});
    const Tensor b = RandomF32(rng, c.options.transpose_b ? Shape{c.n, c.k} : Shape{c.k, c.n});
    const std::vector<double> ref = Reference(a, b, c.options);
    for (int threads : {0, 1, 2, 3, 4, 7}) {
      SetMatmulThreads(threads);
      ATOLL_ASSERT_OK_AND_ASSIGN(Tensor got, Matmul(a, b, c.options));
      SCOPED_TRACE(testing::Message()
                   << c.m << "x" << c.k << "x" << c.n << " ta=" << c.options.transpose_a
                   << " tb=" << c.options.transpose_b << " threads=" << threads);
      ExpectClose(got, {c.m, c.n}, ref, 1e-4, 1e-5);
    }
  }
}

// Several callers, each with its own helpers, multiplying at once with every transpose.
TEST_F(MatmulThreadsKernelTest, CallersOnSeveralThreadsAtOnceEachGetTheirOwnProduct) {
  std::mt19937 rng(72);
  struct Work {
    Tensor a, b;
    MatmulOptions options;
    std::vector<double> ref;
  };
  std::vector<Work> work;
  for (const Case& c : Cases()) {
    Tensor a = RandomF32(rng, c.options.transpose_a ? Shape{c.k, c.m} : Shape{c.m, c.k});
    Tensor b = RandomF32(rng, c.options.transpose_b ? Shape{c.n, c.k} : Shape{c.k, c.n});
    std::vector<double> ref = Reference(a, b, c.options);
    work.push_back({std::move(a), std::move(b), c.options, std::move(ref)});
  }
  for (int callers : {2, 4}) {
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < callers; ++t) {
      threads.emplace_back([&, t] {
        SetMatmulThreads(2);
        for (int round = 0; round < 5; ++round) {
          for (size_t w = 0; w < work.size(); ++w) {
            const Work& job = work[(w + static_cast<size_t>(t)) % work.size()];
            Result<Tensor> got = Matmul(job.a, job.b, job.options);
            if (!got.ok()) {
              wrong++;
              continue;
            }
            const std::vector<double> values = got->ToDoubles();
            for (size_t i = 0; i < values.size(); ++i) {
              if (std::abs(values[i] - job.ref[i]) > 1e-4 + 1e-5 * std::abs(job.ref[i])) {
                wrong++;
                break;
              }
            }
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(wrong.load(), 0) << callers << " callers";
  }
}

}  // namespace
}  // namespace atl::kernels
