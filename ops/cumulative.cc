// The running reductions along one axis: cumsum, cumprod, cummax, cummin (jax.lax's), each
// params = {axis}, attr = reverse. Their type rule, cpu kernel and gradient rules, one part
// a section (ops/op_parts.h says why they are compiled apart).
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

}  // namespace atl::ir::internal
#endif  // ATOLL_OPS_TYPE_RULES

#if ATOLL_OPS_CPU_KERNELS
#include "compute/cpu_kernels.h"
#include "kernels/lax.h"

namespace atl::compute {

Result<Tensor> RunCumulative(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  if (op.params.size() != 1) return InvalidArgument("cumulative: params must be {axis}");
  kernels::CumulativeFn fn = kernels::CumulativeFn::kSum;
  if (op.code == ir::OpCode::kCumprod) fn = kernels::CumulativeFn::kProd;
  if (op.code == ir::OpCode::kCummax) fn = kernels::CumulativeFn::kMax;
  if (op.code == ir::OpCode::kCummin) fn = kernels::CumulativeFn::kMin;
  return InOpDType(op, kernels::Cumulative(fn, *t[0], op.params[0], op.attr != 0));
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

}  // namespace atl::autodiff
#endif  // ATOLL_OPS_GRAD_RULES
