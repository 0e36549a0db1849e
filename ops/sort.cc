// The primitives that order along one axis: sort (jax.lax.sort: several operands, a stable
// sort by the first num_keys), argmax and argmin (jax.lax's). Their type rules, cpu kernels
// and gradient rule (argmax and argmin give positions: no gradient), one part a section
// (ops/op_parts.h says why they are compiled apart).
#include "ops/op_parts.h"

#if ATOLL_OPS_TYPE_RULES
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/ir/type_rules.h"

namespace atl::ir::internal {

// Each needs the whole dimension it orders along on every shard: a cut one is refused naming
// it and the mesh axis; the other dimensions keep their cuts.
Result<TensorType> InferSort(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, op.operands.size()));
  if (op.params.size() != 3) {
    return InvalidArgument(
        fmt::format("sort: params must be dimension, num_keys, output; got "
                    "[{}]",
                    fmt::join(op.params, ",")));
  }
  const int64_t dim = op.params[0], keys = op.params[1], output = op.params[2];
  const TensorType& first = *t[0];
  for (const TensorType* x : t) {
    if (x->shape != first.shape || x->split != first.split) {
      return InvalidArgument(
          fmt::format("sort: operands must share one shape and sharding, got "
                      "{} and {}",
                      Describe(first), Describe(*x)));
    }
  }
  const auto n = static_cast<int64_t>(t.size());
  if (dim < 0 || dim >= static_cast<int64_t>(first.shape.size()) || keys < 1 || keys > n ||
      output < 0 || output >= n) {
    return InvalidArgument(
        fmt::format("sort: dimension {}, num_keys {} and output {} must index "
                    "{} and its {} operands",
                    dim, keys, output, Describe(first), n));
  }
  if (first.split[dim] >= 0) {
    return InvalidArgument(
        fmt::format("sort: dimension {} is cut along mesh axis {}, and a sort "
                    "needs it whole; gather it first, got {}",
                    dim, first.split[dim], Describe(first)));
  }
  return *t[output];
}

Result<TensorType> InferArgReduce(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  const TensorType& x = *t[0];
  ATOLL_ASSIGN_OR_RETURN(const size_t axis, NumericAlongWholeAxis(op, x));
  if (x.shape[axis] == 0) {
    return InvalidArgument(
        fmt::format("{}: axis {} is empty, so it has no position to give", OpName(op.code), axis));
  }
  ATOLL_ASSIGN_OR_RETURN(const DType index, DTypeAttr(op, op.attr, "attr (the index dtype)"));
  if (index != DType::kI32 && index != DType::kI64) {
    return InvalidArgument(fmt::format("{}: the index dtype must be i32 or i64, got {}",
                                       OpName(op.code), DTypeName(index)));
  }
  return Without(x, op.params, index);
}

}  // namespace atl::ir::internal
#endif  // ATOLL_OPS_TYPE_RULES

#if ATOLL_OPS_CPU_KERNELS
#include "compute/cpu_kernels.h"
#include "kernels/lax.h"

namespace atl::compute {

Result<Tensor> RunSort(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  if (op.params.size() != 3) return InvalidArgument("sort: params must be dim, keys, output");
  return InOpDType(op, kernels::Sort(t, op.params[0], op.params[1], op.params[2]));
}

Result<Tensor> RunArgReduce(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  if (op.params.size() != 1) return InvalidArgument("argmax: params must be {axis}");
  return kernels::ArgReduce(op.code == ir::OpCode::kArgmax, *t[0], op.params[0], op.type.dtype);
}

}  // namespace atl::compute
#endif  // ATOLL_OPS_CPU_KERNELS

#if ATOLL_OPS_GRAD_RULES
#include "client/autodiff/grad_rules.h"
#include "client/autodiff/lax_emit.h"

namespace atl::autodiff {

using ir::OpCode;
using ir::Operand;

Result<OperandGrads> GradSort(Backward& b, const OpGrad& g) {
  const auto dim = static_cast<size_t>(g.op.params[0]);
  const auto keys = static_cast<size_t>(g.op.params[1]);
  const auto output = static_cast<size_t>(g.op.params[2]);
  OperandGrads grads(g.op.operands.size());
  if (!g.needed[output]) return grads;
  // The permutation the sort applies (the positions, sorted by the same keys: the sort is
  // stable), then dy sorted by it: each element's cotangent back where it came from.
  ATOLL_ASSIGN_OR_RETURN(const Operand positions, IotaOf(b, ShapeOf(b, g.result), dim));
  std::vector<Operand> operands(g.op.operands.begin(),
                                g.op.operands.begin() + static_cast<ptrdiff_t>(keys));
  operands.push_back(positions);
  const auto d = static_cast<int64_t>(dim);
  ATOLL_ASSIGN_OR_RETURN(const Operand taken,
                         b.Emit(OpCode::kSort, std::move(operands), 0,
                                {d, static_cast<int64_t>(keys), static_cast<int64_t>(keys)}));
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(grads[output], b.Emit(OpCode::kSort, {taken, dy}, 0, {d, 1, 1}));
  return grads;
}

}  // namespace atl::autodiff
#endif  // ATOLL_OPS_GRAD_RULES
