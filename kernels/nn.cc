#include "kernels/nn.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kernels/check.h"
#include "kernels/elementwise.h"
#include "kernels/vector_math.h"

namespace atl::kernels {

using internal::Describe;

namespace {

// `x` as rows of its last dimension: rank >= 1.
struct Rows {
  int64_t count = 0;
  int64_t width = 0;
};

Result<Rows> LastAxisRows(const Tensor& x, std::string_view what) {
  ATOLL_RETURN_IF_ERROR(internal::CheckFloat(x, what));
  if (x.shape().empty()) {
    return InvalidArgument(fmt::format(
        "{} must have rank >= 1 (it works over the last axis), got {}", what, Describe(x)));
  }
  const int64_t width = x.shape().back();
  return Rows{width == 0 ? 0 : x.num_elements() / width, width};
}

// Mean and 1/sqrt(var + eps) of one row, in double.
struct RowStats {
  double mean;
  double rstd;
};

template <typename T>
RowStats Stats(const T* row, int64_t d, double eps) {
  double sum = 0;
  for (int64_t j = 0; j < d; ++j) sum += row[j];
  const double mean = sum / static_cast<double>(d);
  double sq = 0;
  for (int64_t j = 0; j < d; ++j) {
    const double c = row[j] - mean;
    sq += c * c;
  }
  return {mean, 1.0 / std::sqrt(sq / static_cast<double>(d) + eps)};
}

Status CheckEps(double eps) {
  if (!(eps > 0) || !std::isfinite(eps)) {
    return InvalidArgument(
        fmt::format("layer norm epsilon must be positive and finite, got {}", eps));
  }
  return Status::Ok();
}

// The reductions of softmax and cross-entropy keep this many independent running values,
// so that each loop vectorizes: one running value is one long chain of dependent steps.
constexpr int64_t kLanes = 16;

// The largest of x[0..n), NaNs skipped (-inf when there is none).
template <typename T>
T Max(const T* x, int64_t n) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  T lane[kLanes];
  std::fill_n(lane, kLanes, kNegInf);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lane[l] = x[j + l] > lane[l] ? x[j + l] : lane[l];
  }
  T max = kNegInf;
  for (; j < n; ++j) max = x[j] > max ? x[j] : max;
  for (T v : lane) max = v > max ? v : max;
  return max;
}

// The sum of x[0..n), in double.
template <typename T>
double Sum(const T* x, int64_t n) {
  double lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lane[l] += x[j + l];
  }
  double sum = 0;
  for (; j < n; ++j) sum += x[j];
  for (double v : lane) sum += v;
  return sum;
}

template <typename T>
void SoftmaxRows(const T* in, T* dst, Rows rows) {
  for (int64_t r = 0; r < rows.count; ++r) {
    const T* row = in + r * rows.width;
    T* y = dst + r * rows.width;
    const T max = Max(row, rows.width);
    for (int64_t j = 0; j < rows.width; ++j) y[j] = row[j] - max;
    Exp(y, y, rows.width);
    const auto inv = static_cast<T>(1.0 / Sum(y, rows.width));
    for (int64_t j = 0; j < rows.width; ++j) y[j] *= inv;
  }
}

// dx = y (dy - sum(dy y)) per row, the sum in double.
template <typename T>
void SoftmaxBackwardRows(const T* dy, const T* y, T* dx, Rows rows) {
  for (int64_t r = 0; r < rows.count; ++r) {
    const T* yr = y + r * rows.width;
    const T* g = dy + r * rows.width;
    T* out = dx + r * rows.width;
    double dot = 0;
    for (int64_t j = 0; j < rows.width; ++j) dot += static_cast<double>(g[j]) * yr[j];
    const auto d = static_cast<T>(dot);
    for (int64_t j = 0; j < rows.width; ++j) out[j] = yr[j] * (g[j] - d);
  }
}

template <typename T>
void LayerNormRows(const T* x, const T* g, const T* b, T* out, Rows rows, double eps) {
  for (int64_t r = 0; r < rows.count; ++r) {
    const T* row = x + r * rows.width;
    T* y = out + r * rows.width;
    const RowStats s = Stats(row, rows.width, eps);
    for (int64_t j = 0; j < rows.width; ++j) {
      y[j] = static_cast<T>((row[j] - s.mean) * s.rstd) * g[j] + b[j];
    }
  }
}

template <typename T>
void LayerNormBackwardRows(const T* x, const T* dy, const T* g, double eps, Rows rows,
                           LayerNormGrads& out) {
  const int64_t d = rows.width;
  std::vector<double> dg(static_cast<size_t>(d), 0.0), db(static_cast<size_t>(d), 0.0);
  for (int64_t r = 0; r < rows.count; ++r) {
    const T* xr = x + r * d;
    const T* dyr = dy + r * d;
    T* dxr = out.dx.as<T>().data() + r * d;
    const RowStats s = Stats(xr, d, eps);
    // With xhat = (x - mean) rstd and g = dy * gamma:
    //   dx = rstd (g - mean(g) - xhat mean(g xhat)).
    double mean_g = 0, mean_gx = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double xhat = (xr[j] - s.mean) * s.rstd;
      const double gj = static_cast<double>(dyr[j]) * g[j];
      mean_g += gj;
      mean_gx += gj * xhat;
      dg[j] += dyr[j] * xhat;
      db[j] += dyr[j];
    }
    mean_g /= static_cast<double>(d);
    mean_gx /= static_cast<double>(d);
    for (int64_t j = 0; j < d; ++j) {
      const double xhat = (xr[j] - s.mean) * s.rstd;
      const double gj = static_cast<double>(dyr[j]) * g[j];
      dxr[j] = static_cast<T>(s.rstd * (gj - mean_g - xhat * mean_gx));
    }
  }
  for (int64_t j = 0; j < d; ++j) {
    out.dgamma.as<T>()[j] = static_cast<T>(dg[j]);
    out.dbeta.as<T>()[j] = static_cast<T>(db[j]);
  }
}

// The loss's sum over the rows and each row's gradient (not yet divided by the batch) of
// logits T [b,c] against labels L [b], checked to be in [0, c).
template <typename T, typename L>
double CrossEntropyRows(const T* logits, const L* label, int64_t b, int64_t c, T* dlogits) {
  double total = 0;
  const double inv_b = 1.0 / static_cast<double>(b);
  for (int64_t i = 0; i < b; ++i) {
    const T* row = logits + i * c;
    T* grad = dlogits + i * c;
    const T max = Max(row, c);
    const int64_t top = std::find(row, row + c, max) - row;  // c when every logit is NaN
    // e = exp(row - max) in the gradient's row: every exponent <= 0, so nothing overflows,
    // and e[top] = 1. The other classes' sum is kept apart from that 1: when the prediction
    // is confident it is tiny, and 1 + rest would round most of it away, where the loss
    // (log1p(rest) for the top class) and 1 - p[top] = rest / sum need it.
    for (int64_t j = 0; j < c; ++j) grad[j] = row[j] - max;
    Exp(grad, grad, c);
    const T e_top = top < c ? grad[top] : std::numeric_limits<T>::quiet_NaN();  // 1, or NaN
    if (top < c) grad[top] = 0;
    const double rest = Sum(grad, c);
    if (top < c) grad[top] = e_top;
    const double sum = e_top + rest;
    const auto y = static_cast<int64_t>(label[i]);
    // log sum e^row - row[y] = log(sum) + max - row[y], where log(sum) = log1p(rest) (plus
    // e_top - 1, which is 0 but for NaN).
    total += std::log1p(rest + (e_top - 1.0)) + (static_cast<double>(max) - row[y]);
    // p[y] - 1 = -(sum of the classes but y) / sum; for y other than top, p[y] <= 1/2 and
    // sum - e[y] loses nothing.
    const double not_y = y == top ? rest : sum - grad[y];
    const auto scale = static_cast<T>(inv_b / sum);
    for (int64_t j = 0; j < c; ++j) grad[j] *= scale;
    grad[y] = static_cast<T>(-not_y / sum * inv_b);
  }
  return total;
}

}  // namespace

Result<Tensor> Softmax(const Tensor& x) {
  ATOLL_ASSIGN_OR_RETURN(const Rows rows, LastAxisRows(x, "softmax operand"));
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(x.dtype(), x.shape()));
  internal::ForFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    SoftmaxRows(x.as<T>().data(), out.as<T>().data(), rows);
  });
  return out;
}

Result<Tensor> SoftmaxBackward(const Tensor& dy, const Tensor& y) {
  ATOLL_ASSIGN_OR_RETURN(const Rows rows, LastAxisRows(y, "softmax backward y"));
  ATOLL_RETURN_IF_ERROR(internal::CheckTypeShape(dy, y.dtype(), y.shape(), "softmax backward dy"));
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(y.dtype(), y.shape()));
  internal::ForFloat(y.dtype(), [&](auto zero) {
    using T = decltype(zero);
    SoftmaxBackwardRows(dy.as<T>().data(), y.as<T>().data(), out.as<T>().data(), rows);
  });
  return out;
}

Result<Tensor> LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) {
  ATOLL_ASSIGN_OR_RETURN(const Rows rows, LastAxisRows(x, "layer norm x"));
  ATOLL_RETURN_IF_ERROR(
      internal::CheckTypeShape(gamma, x.dtype(), {rows.width}, "layer norm gamma"));
  ATOLL_RETURN_IF_ERROR(internal::CheckTypeShape(beta, x.dtype(), {rows.width}, "layer norm beta"));
  ATOLL_RETURN_IF_ERROR(CheckEps(eps));
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(x.dtype(), x.shape()));
  internal::ForFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    LayerNormRows(x.as<T>().data(), gamma.as<T>().data(), beta.as<T>().data(), out.as<T>().data(),
                  rows, eps);
  });
  return out;
}

Result<LayerNormGrads> LayerNormBackward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                         double eps) {
  ATOLL_ASSIGN_OR_RETURN(const Rows rows, LastAxisRows(x, "layer norm backward x"));
  ATOLL_RETURN_IF_ERROR(
      internal::CheckTypeShape(dy, x.dtype(), x.shape(), "layer norm backward dy"));
  ATOLL_RETURN_IF_ERROR(
      internal::CheckTypeShape(gamma, x.dtype(), {rows.width}, "layer norm backward gamma"));
  ATOLL_RETURN_IF_ERROR(CheckEps(eps));
  LayerNormGrads grads;
  ATOLL_ASSIGN_OR_RETURN(grads.dx, internal::Allocate(x.dtype(), x.shape()));
  ATOLL_ASSIGN_OR_RETURN(grads.dgamma, internal::Allocate(x.dtype(), {rows.width}));
  ATOLL_ASSIGN_OR_RETURN(grads.dbeta, internal::Allocate(x.dtype(), {rows.width}));
  internal::ForFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    LayerNormBackwardRows(x.as<T>().data(), dy.as<T>().data(), gamma.as<T>().data(), eps, rows,
                          grads);
  });
  return grads;
}

Result<Tensor> GeluBackward(const Tensor& dy, const Tensor& x) {
  return UnaryBackward(UnaryFn::kGelu, dy, x);
}

Result<CrossEntropyResult> CrossEntropy(const Tensor& logits, const Tensor& labels) {
  ATOLL_RETURN_IF_ERROR(internal::CheckFloat(logits, "cross-entropy logits"));
  ATOLL_RETURN_IF_ERROR(internal::CheckInteger(labels, "cross-entropy labels"));
  if (logits.shape().size() != 2 || logits.shape()[0] < 1) {
    return InvalidArgument(fmt::format(
        "cross-entropy logits must be f32[b,c] or f64[b,c] with b >= 1, got {}", Describe(logits)));
  }
  const int64_t b = logits.shape()[0];
  const int64_t c = logits.shape()[1];
  if (labels.shape() != Shape{b}) {
    return InvalidArgument(
        fmt::format("cross-entropy labels must be i32[{}] or i64[{}] for logits {}, got {}", b, b,
                    Describe(logits), Describe(labels)));
  }
  const std::vector<double> label = labels.ToDoubles();
  for (int64_t i = 0; i < b; ++i) {
    if (label[i] < 0 || label[i] >= static_cast<double>(c)) {
      return InvalidArgument(
          fmt::format("cross-entropy label {} of example {} is out of range: expected [0, {})",
                      label[i], i, c));
    }
  }
  CrossEntropyResult r;
  ATOLL_ASSIGN_OR_RETURN(r.loss, internal::Allocate(logits.dtype(), {}));
  ATOLL_ASSIGN_OR_RETURN(r.dlogits, internal::Allocate(logits.dtype(), logits.shape()));
  internal::ForFloat(logits.dtype(), [&](auto zero) {
    using T = decltype(zero);
    internal::ForInteger(labels.dtype(), [&](auto label_zero) {
      using L = decltype(label_zero);
      const double total = CrossEntropyRows(logits.as<T>().data(), labels.as<L>().data(), b, c,
                                            r.dlogits.as<T>().data());
      r.loss.as<T>()[0] = static_cast<T>(total / static_cast<double>(b));
    });
  });
  return r;
}

}  // namespace atl::kernels
