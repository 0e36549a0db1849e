// The running reductions along one axis: cumsum, cumprod, cummax, cummin, cumlogsumexp
// (jax.lax's), each params = {axis}, attr = reverse. Their type rule, cpu kernel and gradient
// rules, one part a section (ops/op_parts.h says why they are compiled apart).
#include "ops/op_parts.h"

#if ATOLL_OPS_TYPE_RULES
#include <fmt/format.h>

#include "common/ir/type_rules.h"

namespace atl::ir::internal {

// Every shard must hold the whole axis it runs along: NumericAlongWholeAxis refuses a cut
// axis, naming it and the mesh axis; every other dimension keeps its cut.
Result<TensorType> InferCumulative(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  const TensorType& x = *t[0];
  ATOLL_RETURN_IF_ERROR(NumericAlongWholeAxis(op, x).status());
  if (op.attr != 0 && op.attr != 1) {
    return InvalidArgument(
        fmt::format("{}: attr (reverse) must be 0 or 1, got {}", OpName(op.code), op.attr));
  }
  return x;
}

// cumlogsumexp: the cumulative rows' rule, on floats only (jax's logaddexp is a float op).
Result<TensorType> InferCumlogsumexp(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  ATOLL_RETURN_IF_ERROR(NeedDType(op, *t[0], kFloats));
  return InferCumulative(fn, op);
}

}  // namespace atl::ir::internal
#endif  // ATOLL_OPS_TYPE_RULES

#if ATOLL_OPS_CPU_KERNELS
#include <algorithm>
#include <cmath>
#include <type_traits>

#include <fmt/format.h>

#include "common/base/dtype_types.h"
#include "compute/cpu_kernels.h"
#include "kernels/lax.h"
#include "kernels/nd_index.h"

namespace atl::compute {

namespace {

// jax's logaddexp, log(e^a + e^b): the larger plus log1p(e^-|a - b|), which neither
// overflows nor loses the smaller; where a - b is NaN (a NaN, or infinities of one sign,
// which that form would make NaN) a + b, which is NaN, +inf or -inf as jax gives.
template <typename T>
T LogAddExp(T a, T b) {
  const T delta = a - b;
  if (std::isnan(delta)) return a + b;
  return std::max(a, b) + std::log1p(std::exp(-std::abs(delta)));
}

}  // namespace

Result<Tensor> RunCumulative(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  if (op.params.size() != 1) return InvalidArgument("cumulative: params must be {axis}");
  kernels::CumulativeFn fn = kernels::CumulativeFn::kSum;
  if (op.code == ir::OpCode::kCumprod) fn = kernels::CumulativeFn::kProd;
  if (op.code == ir::OpCode::kCummax) fn = kernels::CumulativeFn::kMax;
  if (op.code == ir::OpCode::kCummin) fn = kernels::CumulativeFn::kMin;
  return InOpDType(op, kernels::Cumulative(fn, *t[0], op.params[0], op.attr != 0));
}

// One pass along the axis per (outer, inner) position, in x's dtype (f32 or f64: RunCpuOp
// widens bf16 and f16 to f32, and InOpDType rounds the result back once).
Result<Tensor> RunCumlogsumexp(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  const Tensor& x = *t[0];
  const Shape& shape = x.shape();
  if (op.params.size() != 1 || op.params[0] < 0 ||
      op.params[0] >= static_cast<int64_t>(shape.size())) {
    return InvalidArgument("cumlogsumexp: params must be {axis}, an axis of x");
  }
  const auto around = kernels::internal::SplitAround(shape, static_cast<size_t>(op.params[0]));
  const bool reverse = op.attr != 0;
  Tensor out = Tensor::ForOverwrite(x.dtype(), shape);  // every element is written
  bool computed = false;
  VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T>) {
      const T* v = x.as<T>().data();
      T* z = out.as<T>().data();
      for (int64_t o = 0; o < around.outer; ++o) {
        for (int64_t i = 0; i < around.inner; ++i) {
          for (int64_t e = 0; e < around.extent; ++e) {
            const int64_t step = reverse ? around.extent - 1 - e : e;
            const int64_t at = (o * around.extent + step) * around.inner + i;
            const int64_t before = at + (reverse ? around.inner : -around.inner);
            z[at] = e == 0 ? v[at] : LogAddExp(z[before], v[at]);
          }
        }
      }
      computed = true;
    }
  });
  if (!computed) {
    return InvalidArgument(
        fmt::format("cumlogsumexp takes a float x, got {}", DTypeName(x.dtype())));
  }
  return InOpDType(op, std::move(out));
}

}  // namespace atl::compute
#endif  // ATOLL_OPS_CPU_KERNELS

#if ATOLL_OPS_GRAD_RULES
#include "client/autodiff/grad_rules.h"
#include "client/autodiff/lax_emit.h"

namespace atl::autodiff {

// Each rule is exact where jax's is (no division by an element, which may be 0): a running
// reduction's cotangent comes from the pairs (i, j) of positions along its axis, output i
// taking input j, a tensor n times its operand (an axis of n).

namespace {

using ir::OpCode;
using ir::Operand;
using Dims = std::vector<int64_t>;

// The positions (i, j) along `axis` of x's shape: that shape with a dimension j after axis
// (then i), output i's and input j's.
struct Pairs {
  Shape shape;
  size_t axis;

  Pairs(const Shape& x, size_t at) : shape(x), axis(at) {
    shape.insert(shape.begin() + static_cast<ptrdiff_t>(at) + 1, x[at]);
  }
  // v (of x's shape) spread over the pairs, its axis as i (or as j).
  Result<Operand> Spread(Backward& b, const Operand& v, bool as_j) const {
    Dims dims;
    for (size_t d = 0; d + 1 < shape.size(); ++d) {
      dims.push_back(static_cast<int64_t>(d < axis || (d == axis && !as_j) ? d : d + 1));
    }
    return BroadcastBack(b, v, shape, dims);
  }
  // Whether output i takes input j: j <= i, or j >= i for a reverse reduction.
  Result<Operand> Reaches(Backward& b, bool reverse) const {
    ATOLL_ASSIGN_OR_RETURN(const Operand i, IotaOf(b, shape, axis));
    ATOLL_ASSIGN_OR_RETURN(const Operand j, IotaOf(b, shape, axis + 1));
    return b.Emit(reverse ? OpCode::kLe : OpCode::kGe, {i, j});
  }
  Result<Operand> Diagonal(Backward& b) const {
    ATOLL_ASSIGN_OR_RETURN(const Operand i, IotaOf(b, shape, axis));
    ATOLL_ASSIGN_OR_RETURN(const Operand j, IotaOf(b, shape, axis + 1));
    return b.Emit(OpCode::kEq, {i, j});
  }
};

}  // namespace

// cumsum's transpose is the cumsum in the other direction.
Result<OperandGrads> GradCumsum(Backward& b, const OpGrad& g) {
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand back,
                         b.Emit(OpCode::kCumsum, {dy}, g.op.attr != 0 ? 0 : 1, g.op.params));
  return OperandGrads{back};
}

Result<OperandGrads> GradCumprod(Backward& b, const OpGrad& g) {
  const Operand& x = g.op.operands[0];
  const auto axis = static_cast<size_t>(g.op.params[0]);
  ATOLL_RETURN_IF_ERROR(NotCut(b, g.op, g.op.params));
  const bool reverse = g.op.attr != 0;
  // Output i's derivative by input j (j reached from i) is the running product up to i with
  // x_j taken as 1: the running products of x with its diagonal made ones.
  const Pairs pairs(ShapeOf(b, x), axis);
  ATOLL_ASSIGN_OR_RETURN(const Operand xs, pairs.Spread(b, x, false));
  ATOLL_ASSIGN_OR_RETURN(const Operand diagonal, pairs.Diagonal(b));
  ATOLL_ASSIGN_OR_RETURN(const Operand ones, FilledLike(b, xs, 1));
  ATOLL_ASSIGN_OR_RETURN(const Operand without_j, b.Emit(OpCode::kSelectN, {diagonal, xs, ones}));
  ATOLL_ASSIGN_OR_RETURN(const Operand slopes, b.Emit(OpCode::kCumprod, {without_j}, g.op.attr,
                                                      {static_cast<int64_t>(axis)}));
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand dys, pairs.Spread(b, dy, false));
  ATOLL_ASSIGN_OR_RETURN(const Operand terms, Times(b, dys, slopes));
  ATOLL_ASSIGN_OR_RETURN(const Operand reaches, pairs.Reaches(b, reverse));
  ATOLL_ASSIGN_OR_RETURN(const Operand zeros, FilledLike(b, xs, 0));
  ATOLL_ASSIGN_OR_RETURN(const Operand kept, b.Emit(OpCode::kSelectN, {reaches, zeros, terms}));
  ATOLL_ASSIGN_OR_RETURN(const Operand back, SumOver(b, kept, {static_cast<int64_t>(axis)}));
  return OperandGrads{back};
}

Result<OperandGrads> GradCumulativeChooser(Backward& b, const OpGrad& g) {
  const Operand& x = g.op.operands[0];
  const auto axis = static_cast<size_t>(g.op.params[0]);
  ATOLL_RETURN_IF_ERROR(NotCut(b, g.op, g.op.params));
  // Output i's cotangent goes to the inputs it reaches that equal it, shared equally among
  // them (as reduce_max's: jax's splits ties among them too, in the order its scan pairs them).
  const Pairs pairs(ShapeOf(b, x), axis);
  ATOLL_ASSIGN_OR_RETURN(const Operand xs, pairs.Spread(b, x, true));
  ATOLL_ASSIGN_OR_RETURN(const Operand ys, pairs.Spread(b, g.result, false));
  ATOLL_ASSIGN_OR_RETURN(const Operand equal, b.Emit(OpCode::kEq, {xs, ys}));
  ATOLL_ASSIGN_OR_RETURN(const Operand reaches, pairs.Reaches(b, g.op.attr != 0));
  ATOLL_ASSIGN_OR_RETURN(const Operand took, b.Emit(OpCode::kAnd, {equal, reaches}));
  const DType dtype = g.op.type.dtype;
  ATOLL_ASSIGN_OR_RETURN(const Operand weight,
                         b.Emit(OpCode::kConvertElementType, {took}, static_cast<double>(dtype)));
  ATOLL_ASSIGN_OR_RETURN(const Operand counted,
                         SumOver(b, weight, {static_cast<int64_t>(axis) + 1}));
  ATOLL_ASSIGN_OR_RETURN(const Operand one, FilledLike(b, counted, 1));
  ATOLL_ASSIGN_OR_RETURN(const Operand count, b.Emit(OpCode::kMax, {counted, one}));  // NaN: 0
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand share, Over(b, dy, count));
  ATOLL_ASSIGN_OR_RETURN(const Operand shares, pairs.Spread(b, share, false));
  ATOLL_ASSIGN_OR_RETURN(const Operand terms, Times(b, weight, shares));
  ATOLL_ASSIGN_OR_RETURN(const Operand back, SumOver(b, terms, {static_cast<int64_t>(axis)}));
  return OperandGrads{back};
}

// dx_j = the sum over the outputs i that take x_j of dy_i e^(x_j - y_i), a running sum the
// other way. Split dy = p - n (p = max(dy, 0), n = max(-dy, 0)), each part is
// exp(x + cumlogsumexp(log p - y)) in the other direction: no e^-y overflows, and a
// cotangent of 0 (log 0 = -inf) adds nothing. p - n is linear in dy, so a partial dy gives
// the shares of dx. The axis is whole: the forward rule refused a cut one.
Result<OperandGrads> GradCumlogsumexp(Backward& b, const OpGrad& g) {
  if (!g.needed[0]) return OperandGrads(1);
  const Operand& x = g.op.operands[0];
  const double other_way = g.op.attr != 0 ? 0 : 1;
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand zeros, FilledLike(b, dy, 0));
  ATOLL_ASSIGN_OR_RETURN(const Operand minus_dy, b.Emit(OpCode::kNeg, {dy}));
  Operand parts[2];
  for (int k = 0; k < 2; ++k) {
    ATOLL_ASSIGN_OR_RETURN(const Operand part,
                           b.Emit(OpCode::kMax, {k == 0 ? dy : minus_dy, zeros}));
    ATOLL_ASSIGN_OR_RETURN(const Operand log_part, b.Emit(OpCode::kLog, {part}));
    ATOLL_ASSIGN_OR_RETURN(const Operand scaled, b.Emit(OpCode::kSub, {log_part, g.result}));
    ATOLL_ASSIGN_OR_RETURN(const Operand summed,
                           b.Emit(OpCode::kCumlogsumexp, {scaled}, other_way, g.op.params));
    ATOLL_ASSIGN_OR_RETURN(const Operand at_x, Plus(b, x, summed));
    ATOLL_ASSIGN_OR_RETURN(parts[k], b.Emit(OpCode::kExp, {at_x}));
  }
  ATOLL_ASSIGN_OR_RETURN(const Operand back, b.Emit(OpCode::kSub, {parts[0], parts[1]}));
  return OperandGrads{back};
}

}  // namespace atl::autodiff
#endif  // ATOLL_OPS_GRAD_RULES
