// Reverse-mode automatic differentiation of compiled functions, as JAX's grad,
// value_and_grad and vjp do it: a transform of a FunctionBuilder into the FunctionBuilder of
// its gradient, which is registered, called or inlined (FunctionBuilder::Call) as any other.
//
// Example: one SGD step of a data-parallel linear model.
//   atl::FunctionBuilder loss("loss");
//   auto x = loss.Input(atl::DType::kF32, {64, 16});                 // rows split
//   auto labels = loss.Input(atl::DType::kI32, {64});
//   auto w = loss.Input(atl::DType::kF32, {16, 4}, atl::Sharding::Replicated());
//   loss.Output(loss.AllReduceSum(loss.CrossEntropy(loss.Matmul(x, w), labels).loss));
//   auto grad = atl::ValueAndGrad(loss, {2}).value();  // (x, labels, w) -> loss, dloss/dw
//   atl::FunctionBuilder step("step");
//   ... its inputs x, labels, w ...
//   auto out = step.Call(grad, {x, labels, w});
//   step.Output(step.SgdUpdate(w, out[1], 0.1));
//
// The gradient function recomputes the forward ops it needs, then runs the backward ops of a
// rule per op (common/ir/ops.def's GradRule column). Each gradient has its input's type and
// sharding. Where the backward sums over a dimension cut over devices (x^T dy over a row-split
// batch, a bias over split rows) each device holds a partial sum, and Grad adds the all_reduce_sum
// along each mesh axis that cut the summed dimension: the gradient of a replicated weight in
// a data-parallel function is the whole batch's. Every float dtype differentiates (bf16 and
// f16 computed in f32, as their forward ops); the collectives have rules (all_reduce_max and
// all_reduce_min are refused), and cast's casts the gradient back.
#pragma once

#include <vector>

#include "atoll/function.h"
#include "atoll/status.h"

namespace atl {

struct GradOptions {
  // The outputs differentiated. Without cotangents: exactly one, a float [] (a loss), whose
  // gradient is taken (jax.grad). With cotangents: any float outputs.
  std::vector<int> outputs = {0};
  // The gradient function takes, after the function's inputs, one input per output above,
  // of that output's type: its cotangent (dL/d output). It returns the vector-Jacobian
  // product, the sum over those outputs of cotangent times d output / d input (jax.vjp):
  // how a pipeline stage's backward takes the gradient that the next stage sends back.
  bool cotangents = false;
};

// The function of `f`'s inputs (and the cotangents, with GradOptions::cotangents) whose
// outputs are the gradients with respect to the inputs `wrt` (float inputs, by index, in
// that order). An input the outputs do not depend on gets zeros. Errors (InvalidArgument naming
// what is accepted): f's own error, an index out of range or repeated, an integer input or
// output, a non-scalar output without cotangents, an output that depends on a differentiated
// input through an op that is not differentiable (filter, sgd_update, adam_*, the *_grad
// ops, all_reduce_max/min), naming the op.
Result<FunctionBuilder> Grad(const FunctionBuilder& f, const std::vector<int>& wrt = {0},
                             const GradOptions& options = {});

// The same function returning all of f's outputs first, then the gradients
// (jax.value_and_grad).
Result<FunctionBuilder> ValueAndGrad(const FunctionBuilder& f, const std::vector<int>& wrt = {0},
                                     const GradOptions& options = {});

}  // namespace atl
