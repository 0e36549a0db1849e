// Double-precision references for the kernels, shared by the kernel tests (f32 and f64) and
// the table-driven tests of the compute layer: the elementwise ones (kernels::UnaryFn, one per
// row of atoll/unary_ops.def, and kernels::BinaryFn; a new row does not compile here
// (-Wswitch) until it has its reference), matmul, softmax, layer norm, cross-entropy and a
// 3x3 convolution.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "atoll/tensor.h"
#include "kernels/elementwise.h"
#include "kernels/lax.h"

namespace atl::testutil {

inline double RefUnary(kernels::UnaryFn fn, double x) {
  using kernels::UnaryFn;
  switch (fn) {
    case UnaryFn::kExp:
      return std::exp(x);
    case UnaryFn::kLog:
      return std::log(x);
    case UnaryFn::kTanh:
      return std::tanh(x);
    case UnaryFn::kRelu:
      return x < 0 ? 0 : x;
    case UnaryFn::kNeg:
      return -x;
    case UnaryFn::kSqrt:
      return std::sqrt(x);
    case UnaryFn::kRsqrt:
      return 1 / std::sqrt(x);
    case UnaryFn::kGelu:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case UnaryFn::kSigmoid:
      return 1 / (1 + std::exp(-x));
  }
  return NAN;
}

inline double RefBinary(kernels::BinaryFn fn, double a, double b) {
  using kernels::BinaryFn;
  switch (fn) {
    case BinaryFn::kAdd:
      return a + b;
    case BinaryFn::kSub:
      return a - b;
    case BinaryFn::kMul:
      return a * b;
    case BinaryFn::kDiv:
      return a / b;
    case BinaryFn::kMax:
      return std::max(a, b);
    case BinaryFn::kMin:
      return std::min(a, b);
  }
  return NAN;
}

// Where a test draws `fn`'s random inputs: (0.01, 9) for the ops defined on positive
// numbers only, (-4, 4) for the rest.
struct UnaryDomain {
  float lo;
  float hi;
};
inline UnaryDomain DomainOf(kernels::UnaryFn fn) {
  using kernels::UnaryFn;
  const bool positive = fn == UnaryFn::kLog || fn == UnaryFn::kSqrt || fn == UnaryFn::kRsqrt;
  return positive ? UnaryDomain{0.01f, 9.0f} : UnaryDomain{-4.0f, 4.0f};
}

// op(a) x op(b) by a triple loop, a [rows, a_cols] and b [.., b_cols] row-major, op
// transposing where asked: [m,n].
inline std::vector<double> RefMatmul(const std::vector<double>& a, int64_t a_cols, bool ta,
                                     const std::vector<double>& b, int64_t b_cols, bool tb,
                                     int64_t m, int64_t k, int64_t n) {
  // op(x)[i][p] of x stored row-major with `cols` columns.
  auto at = [](const std::vector<double>& x, int64_t cols, bool t, int64_t i, int64_t p) {
    return t ? x[p * cols + i] : x[i * cols + p];
  };
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < k; ++p)
        c[i * n + j] += at(a, a_cols, ta, i, p) * at(b, b_cols, tb, p, j);
    }
  }
  return c;
}

inline std::vector<double> RefSoftmax(const std::vector<double>& x, int64_t width) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r * width < x.size(); ++r) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < width; ++j) mx = std::max(mx, x[r * width + j]);
    for (int64_t j = 0; j < width; ++j) sum += std::exp(x[r * width + j] - mx);
    for (int64_t j = 0; j < width; ++j) y[r * width + j] = std::exp(x[r * width + j] - mx) / sum;
  }
  return y;
}

inline std::vector<double> RefLayerNorm(const std::vector<double>& x, const std::vector<double>& g,
                                        const std::vector<double>& b, double eps) {
  const size_t d = g.size();
  std::vector<double> y(x.size());
  for (size_t r = 0; r * d < x.size(); ++r) {
    double mean = 0, var = 0;
    for (size_t j = 0; j < d; ++j) mean += x[r * d + j];
    mean /= d;
    for (size_t j = 0; j < d; ++j) var += (x[r * d + j] - mean) * (x[r * d + j] - mean);
    var /= d;
    for (size_t j = 0; j < d; ++j) {
      y[r * d + j] = (x[r * d + j] - mean) / std::sqrt(var + eps) * g[j] + b[j];
    }
  }
  return y;
}

inline double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// The mean over the rows of logits [b,c] of -log softmax(row)[label].
inline double RefCrossEntropy(const std::vector<double>& logits, const std::vector<double>& labels,
                              int64_t c) {
  double total = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < c; ++j) mx = std::max(mx, logits[i * c + j]);
    for (int64_t j = 0; j < c; ++j) sum += std::exp(logits[i * c + j] - mx);
    total += std::log(sum) + mx - logits[i * c + static_cast<int64_t>(labels[i])];
  }
  return total / static_cast<double>(labels.size());
}

// The convolution RefConv3x3 computes, as conv_general_dilated's dimensions: NCHW by OIHW,
// stride 1, padding 1.
inline kernels::ConvDims Conv3x3Dims() {
  return {.strides = {1, 1},
          .low = {1, 1},
          .high = {1, 1},
          .lhs_dilation = {1, 1},
          .rhs_dilation = {1, 1},
          .lhs_spec = {0, 1, 2, 3},
          .rhs_spec = {0, 1, 2, 3},
          .out_spec = {0, 1, 2, 3}};
}

// x [1, c, h, w] by k [o, c, 3, 3], stride 1, padding 1, in double.
inline std::vector<double> RefConv3x3(const Tensor& x, const Tensor& k) {
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

}  // namespace atl::testutil
