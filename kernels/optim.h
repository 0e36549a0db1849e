// Optimizer steps: plain SGD, SGD with momentum, and Adam (with optional decoupled weight
// decay, as in AdamW). Each takes the current tensors (all f32, or all f64, of one shape) and
// returns the updated ones, computed in their dtype; nothing is modified in place. Pure; never
// throw. Thread-safe.
#pragma once

#include <cstdint>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::kernels {

struct SgdOptions {
  double learning_rate = 0.01;  // >= 0
  double momentum = 0.0;        // >= 0; used by SgdMomentumUpdate only
  double weight_decay = 0.0;    // >= 0, L2: adds weight_decay * param to the gradient
};

// param - lr * (grad + weight_decay * param).
Result<Tensor> SgdUpdate(const Tensor& param, const Tensor& grad, const SgdOptions& options);

struct SgdMomentumState {
  Tensor param;
  Tensor velocity;
};

// velocity' = momentum * velocity + (grad + weight_decay * param);
// param' = param - lr * velocity'. (PyTorch's SGD with momentum, no dampening.)
Result<SgdMomentumState> SgdMomentumUpdate(const Tensor& param, const Tensor& grad,
                                           const Tensor& velocity, const SgdOptions& options);

struct AdamOptions {
  double learning_rate = 1e-3;  // >= 0
  double beta1 = 0.9;           // in [0, 1)
  double beta2 = 0.999;         // in [0, 1)
  double epsilon = 1e-8;        // > 0
  double weight_decay = 0.0;    // >= 0, decoupled (AdamW): param -= lr * weight_decay * param
};

struct AdamState {
  Tensor param;
  Tensor m;  // first moment
  Tensor v;  // second moment
};

// One Adam step; `step` counts from 1 (the bias corrections use it):
//   m' = b1 m + (1 - b1) g,  v' = b2 v + (1 - b2) g^2,
//   param' = param - lr (m' / (1 - b1^step) / (sqrt(v' / (1 - b2^step)) + eps) + wd param).
// InvalidArgument for step < 1, a hyper-parameter out of range, or mismatched tensors.
Result<AdamState> AdamUpdate(const Tensor& param, const Tensor& grad, const Tensor& m,
                             const Tensor& v, int64_t step, const AdamOptions& options);

}  // namespace atl::kernels
