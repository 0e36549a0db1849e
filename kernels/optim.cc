#include "kernels/optim.h"

#include <cmath>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "kernels/check.h"

namespace atl::kernels {

namespace {

// `value` finite and within [lo, hi) (hi_open) or [lo, hi].
Status CheckRange(std::string_view name, float value, float lo, float hi, bool hi_open) {
  const bool ok = std::isfinite(value) && value >= lo && (hi_open ? value < hi : value <= hi);
  if (!ok) {
    return InvalidArgument(fmt::format("{} must be finite and in [{}, {}{}, got {}", name, lo, hi,
                                       hi_open ? ")" : "]", value));
  }
  return Status::Ok();
}

constexpr float kInf = HUGE_VALF;

Status CheckSame(const Tensor& param, const Tensor& other, std::string_view what) {
  return internal::CheckF32Shape(other, param.shape(), what);
}

}  // namespace

Result<Tensor> SgdUpdate(const Tensor& param, const Tensor& grad, const SgdOptions& options) {
  ATOLL_RETURN_IF_ERROR(internal::CheckF32(param, "sgd param"));
  ATOLL_RETURN_IF_ERROR(CheckSame(param, grad, "sgd grad"));
  ATOLL_RETURN_IF_ERROR(CheckRange("sgd learning rate", options.learning_rate, 0, kInf, true));
  ATOLL_RETURN_IF_ERROR(CheckRange("sgd weight decay", options.weight_decay, 0, kInf, true));
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(DType::kF32, param.shape()));
  const float* p = param.as<float>().data();
  const float* g = grad.as<float>().data();
  float* dst = out.as<float>().data();
  const float lr = options.learning_rate;
  const float wd = options.weight_decay;
  for (int64_t i = 0; i < param.num_elements(); ++i) dst[i] = p[i] - lr * (g[i] + wd * p[i]);
  return out;
}

Result<SgdMomentumState> SgdMomentumUpdate(const Tensor& param, const Tensor& grad,
                                           const Tensor& velocity, const SgdOptions& options) {
  ATOLL_RETURN_IF_ERROR(internal::CheckF32(param, "sgd param"));
  ATOLL_RETURN_IF_ERROR(CheckSame(param, grad, "sgd grad"));
  ATOLL_RETURN_IF_ERROR(CheckSame(param, velocity, "sgd velocity"));
  ATOLL_RETURN_IF_ERROR(CheckRange("sgd learning rate", options.learning_rate, 0, kInf, true));
  ATOLL_RETURN_IF_ERROR(CheckRange("sgd momentum", options.momentum, 0, kInf, true));
  ATOLL_RETURN_IF_ERROR(CheckRange("sgd weight decay", options.weight_decay, 0, kInf, true));
  ATOLL_ASSIGN_OR_RETURN(Tensor new_param, internal::Allocate(DType::kF32, param.shape()));
  ATOLL_ASSIGN_OR_RETURN(Tensor new_velocity, internal::Allocate(DType::kF32, param.shape()));
  const float* p = param.as<float>().data();
  const float* g = grad.as<float>().data();
  const float* vel = velocity.as<float>().data();
  float* p_out = new_param.as<float>().data();
  float* v_out = new_velocity.as<float>().data();
  const float lr = options.learning_rate;
  const float mu = options.momentum;
  const float wd = options.weight_decay;
  for (int64_t i = 0; i < param.num_elements(); ++i) {
    v_out[i] = mu * vel[i] + (g[i] + wd * p[i]);
    p_out[i] = p[i] - lr * v_out[i];
  }
  return SgdMomentumState{std::move(new_param), std::move(new_velocity)};
}

Result<AdamState> AdamUpdate(const Tensor& param, const Tensor& grad, const Tensor& m,
                             const Tensor& v, int64_t step, const AdamOptions& options) {
  ATOLL_RETURN_IF_ERROR(internal::CheckF32(param, "adam param"));
  ATOLL_RETURN_IF_ERROR(CheckSame(param, grad, "adam grad"));
  ATOLL_RETURN_IF_ERROR(CheckSame(param, m, "adam first moment m"));
  ATOLL_RETURN_IF_ERROR(CheckSame(param, v, "adam second moment v"));
  if (step < 1) return InvalidArgument(fmt::format("adam step counts from 1, got {}", step));
  ATOLL_RETURN_IF_ERROR(CheckRange("adam learning rate", options.learning_rate, 0, kInf, true));
  ATOLL_RETURN_IF_ERROR(CheckRange("adam beta1", options.beta1, 0, 1, true));
  ATOLL_RETURN_IF_ERROR(CheckRange("adam beta2", options.beta2, 0, 1, true));
  ATOLL_RETURN_IF_ERROR(CheckRange("adam weight decay", options.weight_decay, 0, kInf, true));
  if (!(options.epsilon > 0) || !std::isfinite(options.epsilon)) {
    return InvalidArgument(
        fmt::format("adam epsilon must be positive and finite, got {}", options.epsilon));
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor new_param, internal::Allocate(DType::kF32, param.shape()));
  ATOLL_ASSIGN_OR_RETURN(Tensor new_m, internal::Allocate(DType::kF32, param.shape()));
  ATOLL_ASSIGN_OR_RETURN(Tensor new_v, internal::Allocate(DType::kF32, param.shape()));
  const float b1 = options.beta1;
  const float b2 = options.beta2;
  // Bias corrections in double: b^step underflows gracefully to 0 for a large step.
  const auto c1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(b1), step)));
  const auto c2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(b2), step)));
  const float lr = options.learning_rate;
  const float eps = options.epsilon;
  const float wd = options.weight_decay;
  const float* p = param.as<float>().data();
  const float* g = grad.as<float>().data();
  const float* m_in = m.as<float>().data();
  const float* v_in = v.as<float>().data();
  float* p_out = new_param.as<float>().data();
  float* m_out = new_m.as<float>().data();
  float* v_out = new_v.as<float>().data();
  for (int64_t i = 0; i < param.num_elements(); ++i) {
    m_out[i] = b1 * m_in[i] + (1.0f - b1) * g[i];
    v_out[i] = b2 * v_in[i] + (1.0f - b2) * g[i] * g[i];
    const float update = (m_out[i] * c1) / (std::sqrt(v_out[i] * c2) + eps);
    p_out[i] = p[i] - lr * (update + wd * p[i]);
  }
  return AdamState{std::move(new_param), std::move(new_m), std::move(new_v)};
}

}  // namespace atl::kernels
