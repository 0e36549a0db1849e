// The type rules of the gradient ops that Grad emits (see common/ir/ops.def): each is the
// type of the forward op's operand x, given that dy has the type of the forward op's result.
#include <cmath>

#include <fmt/format.h>

#include "common/ir/type_rules.h"

namespace atl::ir::internal {

namespace {

// The forward op whose operand `op` (a gradient op) gives the cotangent of: its code and attr,
// applied to x alone.
Result<Op> ForwardOf(const Op& op, const Operand& x) {
  switch (op.code) {
    case OpCode::kUnaryGrad: {
      const std::optional<int64_t> code = WholeAttr(op.attr);
      if (!code || *code < 0 || *code >= static_cast<int64_t>(kNumOpCodes) ||
          !IsUnaryOp(static_cast<OpCode>(*code))) {
        return InvalidArgument(
            fmt::format("unary_grad: attr must be the code of a unary op, got {}", op.attr));
      }
      return Op{static_cast<OpCode>(*code), {x}, 0.0, {}};
    }
    case OpCode::kReduceSumGrad:
      return Op{OpCode::kReduceSum, {x}, op.attr, {}};
    case OpCode::kSoftmaxGrad:
      return Op{OpCode::kSoftmax, {x}, op.attr, {}};
    case OpCode::kTopKGrad:
      return Op{OpCode::kTopKValues, {x}, op.attr, {}};
    case OpCode::kColumnGrad:
      return Op{OpCode::kColumn, {x}, op.attr, {}};
    default:
      return InvalidArgument(fmt::format("{} is not a gradient op", OpName(op.code)));
  }
}

}  // namespace

Result<TensorType> InferOperandGrad(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2, Dims::kAny));
  const TensorType& dy = *t[0];
  const TensorType& x = *t[1];
  ATOLL_RETURN_IF_ERROR(NeedDType(op, x, kFloats, "x"));
  ATOLL_ASSIGN_OR_RETURN(const Op forward, ForwardOf(op, op.operands[1]));
  Result<TensorType> y = InferType(fn, forward);
  if (!y.ok()) return y.status().WithContext(OpName(op.code));
  if (dy != *y) {
    return InvalidArgument(fmt::format("{}: dy must have the type of {}(x) for x {}: {}, got {}",
                                       OpName(op.code), OpName(forward.code), Describe(x),
                                       Describe(*y), Describe(dy)));
  }
  return x;
}

Result<TensorType> InferFillLike(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1, Dims::kAny));
  ATOLL_RETURN_IF_ERROR(NeedDType(op, *t[0], kFloats));
  if (!std::isfinite(op.attr)) {
    return InvalidArgument(fmt::format("fill_like: attr must be a finite value, got {}", op.attr));
  }
  return *t[0];
}

}  // namespace atl::ir::internal
