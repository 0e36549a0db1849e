#include "kernels/optim.h"

#include <cmath>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "kernels/check.h"

namespace atl::kernels {

namespace {

// `value` finite and within [lo, hi) (hi_open) or [lo, hi].
Status CheckRange(std::string_view name, double value, double lo, double hi, bool hi_open) {
  const bool ok = std::isfinite(value) && value >= lo && (hi_open ? value < hi : value <= hi);
  if (!ok) {
    return InvalidArgument(fmt::format("{} must be finite and in [{}, {}{}, got {}", name, lo, hi,
                                       hi_open ? ")" : "]", value));
  }
  return Status::Ok();
}

constexpr double kInf = HUGE_VAL;

Status CheckSame(const Tensor& param, const Tensor& other, std::string_view what) {
  return internal::CheckTypeShape(other, param.dtype(), param.shape(), what);
}

template <typename T>
void Sgd(const T* p, const T* g, T* dst, int64_t n, const SgdOptions& options) {
  const auto lr = static_cast<T>(options.learning_rate);
  const auto wd = static_cast<T>(options.weight_decay);
  for (int64_t i = 0; i < n; ++i) dst[i] = p[i] - lr * (g[i] + wd * p[i]);
}

template <typename T>
void SgdMomentum(const T* p, const T* g, const T* vel, T* p_out, T* v_out, int64_t n,
                 const SgdOptions& options) {
  const auto lr = static_cast<T>(options.learning_rate);
  const auto mu = static_cast<T>(options.momentum);
  const auto wd = static_cast<T>(options.weight_decay);
  for (int64_t i = 0; i < n; ++i) {
    v_out[i] = mu * vel[i] + (g[i] + wd * p[i]);
    p_out[i] = p[i] - lr * v_out[i];
  }
}

template <typename T>
void Adam(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, int64_t step,
          const AdamOptions& options, AdamState& next) {
  const auto b1 = static_cast<T>(options.beta1);
  const auto b2 = static_cast<T>(options.beta2);
  // Bias corrections in double: b^step underflows gracefully to 0 for a large step.
  const auto c1 = static_cast<T>(1.0 / (1.0 - std::pow(static_cast<double>(b1), step)));
  const auto c2 = static_cast<T>(1.0 / (1.0 - std::pow(static_cast<double>(b2), step)));
  const auto lr = static_cast<T>(options.learning_rate);
  const auto eps = static_cast<T>(options.epsilon);
  const auto wd = static_cast<T>(options.weight_decay);
  constexpr T kOne = 1;
  const T* p = param.as<T>().data();
  const T* g = grad.as<T>().data();
  const T* m_in = m.as<T>().data();
  const T* v_in = v.as<T>().data();
  T* p_out = next.param.as<T>().data();
  T* m_out = next.m.as<T>().data();
  T* v_out = next.v.as<T>().data();
  for (int64_t i = 0; i < param.num_elements(); ++i) {
    m_out[i] = b1 * m_in[i] + (kOne - b1) * g[i];
    v_out[i] = b2 * v_in[i] + (kOne - b2) * g[i] * g[i];
    const T update = (m_out[i] * c1) / (std::sqrt(v_out[i] * c2) + eps);
    p_out[i] = p[i] - lr * (update + wd * p[i]);
  }
}

}  // namespace

Result<Tensor> SgdUpdate(const Tensor& param, const Tensor& grad, const SgdOptions& options) {
  ATOLL_RETURN_IF_ERROR(internal::CheckFloat(param, "sgd param"));
  ATOLL_RETURN_IF_ERROR(CheckSame(param, grad, "sgd grad"));
  ATOLL_RETURN_IF_ERROR(CheckRange("sgd learning rate", options.learning_rate, 0, kInf, true));
  ATOLL_RETURN_IF_ERROR(CheckRange("sgd weight decay", options.weight_decay, 0, kInf, true));
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(param.dtype(), param.shape()));
  internal::ForFloat(param.dtype(), [&](auto zero) {
    using T = decltype(zero);
    Sgd(param.as<T>().data(), grad.as<T>().data(), out.as<T>().data(), param.num_elements(),
        options);
  });
  return out;
}

Result<SgdMomentumState> SgdMomentumUpdate(const Tensor& param, const Tensor& grad,
                                           const Tensor& velocity, const SgdOptions& options) {
  ATOLL_RETURN_IF_ERROR(internal::CheckFloat(param, "sgd param"));
  ATOLL_RETURN_IF_ERROR(CheckSame(param, grad, "sgd grad"));
  ATOLL_RETURN_IF_ERROR(CheckSame(param, velocity, "sgd velocity"));
  ATOLL_RETURN_IF_ERROR(CheckRange("sgd learning rate", options.learning_rate, 0, kInf, true));
  ATOLL_RETURN_IF_ERROR(CheckRange("sgd momentum", options.momentum, 0, kInf, true));
  ATOLL_RETURN_IF_ERROR(CheckRange("sgd weight decay", options.weight_decay, 0, kInf, true));
  SgdMomentumState next;
  ATOLL_ASSIGN_OR_RETURN(next.param, internal::Allocate(param.dtype(), param.shape()));
  ATOLL_ASSIGN_OR_RETURN(next.velocity, internal::Allocate(param.dtype(), param.shape()));
  internal::ForFloat(param.dtype(), [&](auto zero) {
    using T = decltype(zero);
    SgdMomentum(param.as<T>().data(), grad.as<T>().data(), velocity.as<T>().data(),
                next.param.as<T>().data(), next.velocity.as<T>().data(), param.num_elements(),
                options);
  });
  return next;
}

Result<AdamState> AdamUpdate(const Tensor& param, const Tensor& grad, const Tensor& m,
                             const Tensor& v, int64_t step, const AdamOptions& options) {
  ATOLL_RETURN_IF_ERROR(internal::CheckFloat(param, "adam param"));
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
  AdamState next;
  ATOLL_ASSIGN_OR_RETURN(next.param, internal::Allocate(param.dtype(), param.shape()));
  ATOLL_ASSIGN_OR_RETURN(next.m, internal::Allocate(param.dtype(), param.shape()));
  ATOLL_ASSIGN_OR_RETURN(next.v, internal::Allocate(param.dtype(), param.shape()));
  internal::ForFloat(param.dtype(), [&](auto zero) {
    Adam<decltype(zero)>(param, grad, m, v, step, options, next);
  });
  return next;
}

}  // namespace atl::kernels
