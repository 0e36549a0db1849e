// kernels/lax_window.cc's pooling of image planes (a reduce_window over the last two
// dimensions alone, as ONNX's MaxPool and AveragePool lower): max, min and sum windows with
// strides and padding, a NaN winning a max, integers, against a direct loop in double.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/lax.h"
#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

// x [planes..., h, w] pooled by a kh x kw window, strides (sh, sw), padding low (ph, pw) and
// high (qh, qw): the window's elements that fall on x, reduced by `fn`; +-inf or 0 where none.
std::vector<double> RefPool(WindowFn fn, const Tensor& x, int64_t kh, int64_t kw, int64_t sh,
                            int64_t sw, int64_t ph, int64_t pw, int64_t qh, int64_t qw) {
  const Shape& s = x.shape();
  const int64_t h = s[s.size() - 2], w = s[s.size() - 1];
  const int64_t oh = (h + ph + qh - kh) / sh + 1, ow = (w + pw + qw - kw) / sw + 1;
  const int64_t planes = x.num_elements() / (h * w);
  const std::vector<double> v = x.ToDoubles();
  std::vector<double> out;
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        double acc = fn == WindowFn::kSum   ? 0.0
                     : fn == WindowFn::kMax ? -std::numeric_limits<double>::infinity()
                                            : std::numeric_limits<double>::infinity();
        for (int64_t a = 0; a < kh; ++a) {
          for (int64_t b = 0; b < kw; ++b) {
            const int64_t y = i * sh + a - ph, z = j * sw + b - pw;
            if (y < 0 || y >= h || z < 0 || z >= w) continue;
            const double e = v[static_cast<size_t>((p * h + y) * w + z)];
            if (fn == WindowFn::kSum) {
              acc += e;
            } else if (std::isnan(e) || std::isnan(acc)) {
              acc = std::numeric_limits<double>::quiet_NaN();
            } else {
              acc = fn == WindowFn::kMax ? std::max(acc, e) : std::min(acc, e);
            }
          }
        }
        out.push_back(acc);
      }
    }
  }
  return out;
}

Window PlaneWindow(size_t rank, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                   int64_t pw, int64_t qh, int64_t qw) {
  Window w{std::vector<int64_t>(rank, 1), std::vector<int64_t>(rank, 1),
           std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 0),
           std::vector<int64_t>(rank, 1), std::vector<int64_t>(rank, 1)};
  w.size[rank - 2] = kh, w.size[rank - 1] = kw, w.stride[rank - 2] = sh, w.stride[rank - 1] = sw;
  w.low[rank - 2] = ph, w.low[rank - 1] = pw, w.high[rank - 2] = qh, w.high[rank - 1] = qw;
  return w;
}

void ExpectPooled(const Tensor& got, const std::vector<double>& want) {
  const std::vector<double> g = got.ToDoubles();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << "element " << i;
    } else {
      EXPECT_NEAR(g[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "element " << i;
    }
  }
}

TEST(PoolKernelTest, PlanesArePooledAsADirectLoopPoolsThem) {
  std::mt19937 rng(3);
  Tensor x = testutil::RandomF32(rng, {2, 3, 9, 8});
  x.as<float>()[13] = std::numeric_limits<float>::quiet_NaN();  // a max or min it wins
  struct Case {
    WindowFn fn;
    int64_t kh, kw, sh, sw, ph, pw, qh, qw;
  };
  for (const Case& c :
       {Case{WindowFn::kMax, 3, 3, 2, 2, 1, 1, 1, 1},  // resnet's max pooling
        Case{WindowFn::kSum, 2, 2, 2, 2, 0, 0, 0, 0}, Case{WindowFn::kSum, 3, 3, 1, 1, 1, 1, 1, 1},
        Case{WindowFn::kMin, 3, 2, 1, 2, 1, 0, 2, 1},
        Case{WindowFn::kMax, 9, 8, 1, 1, 0, 0, 0, 0}}) {
    SCOPED_TRACE(::testing::Message()
                 << "window " << c.kh << "x" << c.kw << " fn " << static_cast<int>(c.fn));
    auto got =
        ReduceWindow(c.fn, x, PlaneWindow(4, c.kh, c.kw, c.sh, c.sw, c.ph, c.pw, c.qh, c.qw));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectPooled(*got, RefPool(c.fn, x, c.kh, c.kw, c.sh, c.sw, c.ph, c.pw, c.qh, c.qw));
  }
}

TEST(PoolKernelTest, IntegerPlanesSumAndAThreeDimensionalOne) {
  std::mt19937 rng(4);
  const Tensor x = testutil::RandomI32(rng, {4, 6, 5});
  auto got = ReduceWindow(WindowFn::kSum, x, PlaneWindow(3, 2, 3, 2, 1, 1, 0, 0, 1));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->dtype(), DType::kI32);
  ExpectPooled(*got, RefPool(WindowFn::kSum, x, 2, 3, 2, 1, 1, 0, 0, 1));
}

}  // namespace
}  // namespace atl::kernels
