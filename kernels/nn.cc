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
  ATOLL_RETURN_IF_ERROR(internal::CheckF32(x, what));
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

RowStats Stats(const float* row, int64_t d, float eps) {
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

Status CheckEps(float eps) {
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
float Max(const float* x, int64_t n) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float lane[kLanes];
  std::fill_n(lane, kLanes, kNegInf);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lane[l] = x[j + l] > lane[l] ? x[j + l] : lane[l];
  }
  float max = kNegInf;
  for (; j < n; ++j) max = x[j] > max ? x[j] : max;
  for (float v : lane) max = v > max ? v : max;
  return max;
}

// The sum of x[0..n), in double.
double Sum(const float* x, int64_t n) {
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

}  // namespace

Result<Tensor> Softmax(const Tensor& x) {
  ATOLL_ASSIGN_OR_RETURN(const Rows rows, LastAxisRows(x, "softmax operand"));
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(DType::kF32, x.shape()));
  const float* in = x.as<float>().data();
  float* dst = out.as<float>().data();
  for (int64_t r = 0; r < rows.count; ++r) {
    const float* row = in + r * rows.width;
    float* y = dst + r * rows.width;
    const float max = Max(row, rows.width);
    for (int64_t j = 0; j < rows.width; ++j) y[j] = row[j] - max;
    ExpF32(y, y, rows.width);
    const auto inv = static_cast<float>(1.0 / Sum(y, rows.width));
    for (int64_t j = 0; j < rows.width; ++j) y[j] *= inv;
  }
  return out;
}

Result<Tensor> SoftmaxBackward(const Tensor& dy, const Tensor& y) {
  ATOLL_ASSIGN_OR_RETURN(const Rows rows, LastAxisRows(y, "softmax backward y"));
  ATOLL_RETURN_IF_ERROR(internal::CheckF32Shape(dy, y.shape(), "softmax backward dy"));
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(DType::kF32, y.shape()));
  for (int64_t r = 0; r < rows.count; ++r) {
    const float* yr = y.as<float>().data() + r * rows.width;
    const float* g = dy.as<float>().data() + r * rows.width;
    float* dx = out.as<float>().data() + r * rows.width;
    double dot = 0;
    for (int64_t j = 0; j < rows.width; ++j) dot += double{g[j]} * yr[j];
    const auto d = static_cast<float>(dot);
    for (int64_t j = 0; j < rows.width; ++j) dx[j] = yr[j] * (g[j] - d);
  }
  return out;
}

Result<Tensor> LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) {
  ATOLL_ASSIGN_OR_RETURN(const Rows rows, LastAxisRows(x, "layer norm x"));
  ATOLL_RETURN_IF_ERROR(internal::CheckF32Shape(gamma, {rows.width}, "layer norm gamma"));
  ATOLL_RETURN_IF_ERROR(internal::CheckF32Shape(beta, {rows.width}, "layer norm beta"));
  ATOLL_RETURN_IF_ERROR(CheckEps(eps));
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(DType::kF32, x.shape()));
  const float* g = gamma.as<float>().data();
  const float* b = beta.as<float>().data();
  for (int64_t r = 0; r < rows.count; ++r) {
    const float* row = x.as<float>().data() + r * rows.width;
    float* y = out.as<float>().data() + r * rows.width;
    const RowStats s = Stats(row, rows.width, eps);
    for (int64_t j = 0; j < rows.width; ++j) {
      y[j] = static_cast<float>((row[j] - s.mean) * s.rstd) * g[j] + b[j];
    }
  }
  return out;
}

Result<LayerNormGrads> LayerNormBackward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                         float eps) {
  ATOLL_ASSIGN_OR_RETURN(const Rows rows, LastAxisRows(x, "layer norm backward x"));
  ATOLL_RETURN_IF_ERROR(internal::CheckF32Shape(dy, x.shape(), "layer norm backward dy"));
  ATOLL_RETURN_IF_ERROR(internal::CheckF32Shape(gamma, {rows.width}, "layer norm backward gamma"));
  ATOLL_RETURN_IF_ERROR(CheckEps(eps));
  ATOLL_ASSIGN_OR_RETURN(Tensor dx, internal::Allocate(DType::kF32, x.shape()));
  ATOLL_ASSIGN_OR_RETURN(Tensor dgamma, internal::Allocate(DType::kF32, {rows.width}));
  ATOLL_ASSIGN_OR_RETURN(Tensor dbeta, internal::Allocate(DType::kF32, {rows.width}));
  const int64_t d = rows.width;
  std::vector<double> dg(static_cast<size_t>(d), 0.0), db(static_cast<size_t>(d), 0.0);
  const float* g = gamma.as<float>().data();
  for (int64_t r = 0; r < rows.count; ++r) {
    const float* xr = x.as<float>().data() + r * d;
    const float* dyr = dy.as<float>().data() + r * d;
    float* dxr = dx.as<float>().data() + r * d;
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
      dxr[j] = static_cast<float>(s.rstd * (gj - mean_g - xhat * mean_gx));
    }
  }
  for (int64_t j = 0; j < d; ++j) {
    dgamma.as<float>()[j] = static_cast<float>(dg[j]);
    dbeta.as<float>()[j] = static_cast<float>(db[j]);
  }
  return LayerNormGrads{std::move(dx), std::move(dgamma), std::move(dbeta)};
}

Result<Tensor> GeluBackward(const Tensor& dy, const Tensor& x) {
  return UnaryBackward(UnaryFn::kGelu, dy, x);
}

Result<CrossEntropyResult> CrossEntropy(const Tensor& logits, const Tensor& labels) {
  ATOLL_RETURN_IF_ERROR(internal::CheckF32(logits, "cross-entropy logits"));
  ATOLL_RETURN_IF_ERROR(internal::CheckI32(labels, "cross-entropy labels"));
  if (logits.shape().size() != 2 || logits.shape()[0] < 1) {
    return InvalidArgument(
        fmt::format("cross-entropy logits must be f32[b,c] with b >= 1, got {}", Describe(logits)));
  }
  const int64_t b = logits.shape()[0];
  const int64_t c = logits.shape()[1];
  if (labels.shape() != Shape{b}) {
    return InvalidArgument(fmt::format("cross-entropy labels must be i32[{}] for logits {}, got {}",
                                       b, Describe(logits), Describe(labels)));
  }
  const int32_t* label = labels.as<int32_t>().data();
  for (int64_t i = 0; i < b; ++i) {
    if (label[i] < 0 || label[i] >= c) {
      return InvalidArgument(
          fmt::format("cross-entropy label {} of example {} is out of range: expected [0, {})",
                      label[i], i, c));
    }
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor loss, internal::Allocate(DType::kF32, {}));
  ATOLL_ASSIGN_OR_RETURN(Tensor dlogits, internal::Allocate(DType::kF32, logits.shape()));
  double total = 0;
  const double inv_b = 1.0 / static_cast<double>(b);
  for (int64_t i = 0; i < b; ++i) {
    const float* row = logits.as<float>().data() + i * c;
    float* grad = dlogits.as<float>().data() + i * c;
    const float max = Max(row, c);
    const int64_t top = std::find(row, row + c, max) - row;  // c when every logit is NaN
    // e = exp(row - max) in the gradient's row: every exponent <= 0, so nothing overflows,
    // and e[top] = 1. The other classes' sum is kept apart from that 1: when the prediction
    // is confident it is tiny, and 1 + rest would round most of it away, where the loss
    // (log1p(rest) for the top class) and 1 - p[top] = rest / sum need it.
    for (int64_t j = 0; j < c; ++j) grad[j] = row[j] - max;
    ExpF32(grad, grad, c);
    const float e_top = top < c ? grad[top] : NAN;  // 1, or NaN from NaN or infinite logits
    if (top < c) grad[top] = 0;
    const double rest = Sum(grad, c);
    if (top < c) grad[top] = e_top;
    const double sum = e_top + rest;
    const int32_t y = label[i];
    // log sum e^row - row[y] = log(sum) + max - row[y], where log(sum) = log1p(rest) (plus
    // e_top - 1, which is 0 but for NaN).
    total += std::log1p(rest + (e_top - 1.0)) + (static_cast<double>(max) - row[y]);
    // p[y] - 1 = -(sum of the classes but y) / sum; for y other than top, p[y] <= 1/2 and
    // sum - e[y] loses nothing.
    const double not_y = y == top ? rest : sum - grad[y];
    const auto scale = static_cast<float>(inv_b / sum);
    for (int64_t j = 0; j < c; ++j) grad[j] *= scale;
    grad[y] = static_cast<float>(-not_y / sum * inv_b);
  }
  loss.as<float>()[0] = static_cast<float>(total * inv_b);
  return CrossEntropyResult{std::move(loss), std::move(dlogits)};
}

}  // namespace atl::kernels
