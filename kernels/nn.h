// Neural-network layers over the last axis of f32 or f64 tensors (computed in their dtype, row
// statistics in double), with their gradients: softmax,
// layer norm, GELU's gradient (GELU itself is UnaryFn::kGelu, elementwise.h) and softmax
// cross-entropy against integer labels.
// Pure functions returning new tensors; never throw; InvalidArgument names what was expected
// and what came. Row statistics accumulate in double. Thread-safe.
#pragma once

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::kernels {

// exp(x - max) / sum(exp(x - max)) over the last axis of `x` (rank >= 1): numerically stable
// for any finite input. A row of all -inf, or with a NaN or +inf, gives NaN.
Result<Tensor> Softmax(const Tensor& x);

// The gradient of Softmax: y (dy - sum(dy y)) over the last axis, given dy = dL/dy and the
// forward's result y, of one shape.
Result<Tensor> SoftmaxBackward(const Tensor& dy, const Tensor& y);

// Default epsilon of layer norm (added to the variance).
inline constexpr double kLayerNormEpsilon = 1e-5;

// y = (x - mean) / sqrt(var + eps) * gamma + beta over the last axis of `x` [..., d], with
// the biased variance (divided by d). gamma and beta are [d] of x's dtype; eps must be
// positive.
Result<Tensor> LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         double eps = kLayerNormEpsilon);

struct LayerNormGrads {
  Tensor dx;      // like x
  Tensor dgamma;  // [d]
  Tensor dbeta;   // [d]
};

// The gradients of LayerNorm given dy = dL/dy (shaped like x) and the forward's x, gamma
// and eps (the row statistics are recomputed from x).
Result<LayerNormGrads> LayerNormBackward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                         double eps = kLayerNormEpsilon);

// dL/dx = dy * gelu'(x) for dy and x of one shape, gelu being UnaryFn::kGelu's tanh
// approximation (kGeluC, kGeluA in elementwise.h).
Result<Tensor> GeluBackward(const Tensor& dy, const Tensor& x);

struct CrossEntropyResult {
  Tensor loss;     // [] (rank 0): the mean over the batch of -log softmax(logits)[label]
  Tensor dlogits;  // [b,c]: d loss / d logits = (softmax(logits) - onehot(label)) / b
};

// Softmax cross-entropy of `logits` f32 or f64 [b,c] (b >= 1) against `labels` i32 or i64
// [b], each in [0, c), and its gradient with respect to the logits, both of the logits'
// dtype. InvalidArgument for a label out of range (naming the example).
Result<CrossEntropyResult> CrossEntropy(const Tensor& logits, const Tensor& labels);

}  // namespace atl::kernels
