// Elementwise kernels: single unary ops and numpy-broadcast binary ops over f32 or f64, and
// a fused f32 expression (a small program of unary and binary steps over same-shaped inputs)
// evaluated in one pass: the steps run over blocks of 1024 elements that stay in cache, so no
// intermediate tensor is ever built. Pure functions; never throw. Thread-safe.
//
// Arithmetic is IEEE 754: log(0) = -inf, log(-1) = sqrt(-1) = nan, x / 0 = +-inf or nan.
// relu, max and min keep a NaN operand as NaN.
//
// Example: y = relu(x * w + b) * 0.5 without temporaries:
//   FusedExpr e;
//   FusedValue t = e.Apply(BinaryFn::kAdd, e.Apply(BinaryFn::kMul, e.Input(0), e.Input(1)),
//                          e.Input(2));
//   e.Apply(BinaryFn::kMul, e.Apply(UnaryFn::kRelu, t), e.Constant(0.5f));
//   std::vector<Tensor> inputs = {x, w, b};
//   Result<Tensor> y = EvalFused(e, inputs);  // the last step is the result
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::kernels {

// One per row of include/atoll/unary_ops.def (kExp, kLog, ..., kGelu), in its order.
enum class UnaryFn : uint8_t {
#define ATOLL_UNARY_OP(Name, name) k##Name,
#include "atoll/unary_ops.def"
};
// Every UnaryFn, in order.
inline constexpr UnaryFn kUnaryFns[] = {
#define ATOLL_UNARY_OP(Name, name) UnaryFn::k##Name,
#include "atoll/unary_ops.def"
};
enum class BinaryFn : uint8_t { kAdd, kSub, kMul, kDiv, kMax, kMin };

std::string_view UnaryFnName(UnaryFn fn);    // the row's name: "exp", "log", ..., "gelu"
std::string_view BinaryFnName(BinaryFn fn);  // "add", "sub", "mul", "div", "max", "min"

// gelu's tanh approximation, gelu(x) = 0.5 x (1 + tanh(kGeluC (x + kGeluA x^3))), which
// UnaryFn::kGelu computes and GeluBackward (nn.h) differentiates, in T (float or double).
template <typename T>
inline constexpr T kGeluC = static_cast<T>(0.7978845608028654);  // sqrt(2 / pi)
template <typename T>
inline constexpr T kGeluA = static_cast<T>(0.044715);

// fn(x) per element of an f32 or f64 tensor of any shape, computed in its dtype.
Result<Tensor> Unary(UnaryFn fn, const Tensor& x);

// dy * fn'(x) per element, for dy and x f32 or f64 of one type: the gradient of Unary(fn, x),
// computed in that dtype. relu'(0) is 0; where fn' is infinite or undefined (log and sqrt at
// 0, below 0) the result is what IEEE 754 gives (inf or nan).
Result<Tensor> UnaryBackward(UnaryFn fn, const Tensor& dy, const Tensor& x);

// fn(a, b) per element, f32 or f64 (both alike), with numpy broadcasting: shapes are aligned at the
// right and each dimension pair must be equal or have a 1 (a row vector [n] against a matrix [m,n],
// a column [m,1] against [m,n], ...). InvalidArgument naming both shapes otherwise.
Result<Tensor> BroadcastBinary(BinaryFn fn, const Tensor& a, const Tensor& b);

// A handle on one step of a FusedExpr: the index of its node.
struct FusedValue {
  int32_t node = -1;
};

// One step of a fused expression. Operands name earlier nodes.
struct FusedNode {
  enum class Kind : uint8_t { kInput, kConstant, kUnary, kBinary, kBroadcast };
  Kind kind = Kind::kInput;
  int32_t input = 0;   // kInput, kBroadcast: which input tensor
  float constant = 0;  // kConstant: the value, broadcast to every element
  UnaryFn unary = UnaryFn::kExp;
  BinaryFn binary = BinaryFn::kAdd;
  int32_t lhs = -1;  // kUnary, kBinary: the (first) operand's node
  int32_t rhs = -1;  // kBinary: the second operand's node
  // kBroadcast: the input read as jax.lax.broadcast_in_dim(input, result shape, dims) reads
  // it: its dimension i is the result's dims[i], of the same size or 1.
  std::vector<int64_t> dims;
};

// A small elementwise program: a list of nodes, each an input, a constant, or a unary or
// binary step over earlier nodes. Its result is the last node. Building never fails; a
// malformed expression (a node referring to a later one, an input index beyond the inputs
// given) is reported by EvalFused. Not thread-safe to build; a built expression may be
// evaluated from several threads.
class FusedExpr {
 public:
  FusedValue Input(int32_t index);
  // Input `index` broadcast into the result's shape along `dims` (broadcast_in_dim), read
  // in place block by block: no tensor of the result's size is made for it.
  FusedValue Broadcast(int32_t index, std::vector<int64_t> dims);
  FusedValue Constant(float value);
  FusedValue Apply(UnaryFn fn, FusedValue x);
  FusedValue Apply(BinaryFn fn, FusedValue lhs, FusedValue rhs);

  const std::vector<FusedNode>& nodes() const { return nodes_; }
  // "relu(add(mul(in0, in1), in2))": the last node as a formula.
  std::string ToString() const;

 private:
  FusedValue Push(FusedNode node);

  std::vector<FusedNode> nodes_;
};

// Evaluates `expr` per element over `inputs`, which must all be f32 of one shape (at least
// one input); returns an f32 tensor of that shape. Intermediate values live only in a
// per-call scratch of a few KiB per node. InvalidArgument for an empty or malformed
// expression or mismatched inputs.
Result<Tensor> EvalFused(const FusedExpr& expr, std::span<const Tensor> inputs);
// The same over borrowed tensors (a tensor's copy copies its bytes).
Result<Tensor> EvalFused(const FusedExpr& expr, std::span<const Tensor* const> inputs);
// The same into a result of `shape`: the inputs that kInput nodes read must have it, those
// that kBroadcast nodes read must broadcast into it along the node's dims.
Result<Tensor> EvalFused(const FusedExpr& expr, std::span<const Tensor* const> inputs,
                         const Shape& shape);

}  // namespace atl::kernels
