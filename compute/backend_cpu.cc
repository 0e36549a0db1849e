#include "compute/backend_cpu.h"

#include <fmt/format.h>

#include "compute/kernels.h"
#include "compute/model_ops.h"

namespace atl::executor {

namespace {

Result<kernels::BinaryOp> ToBinaryOp(ir::OpCode code) {
  switch (code) {
    case ir::OpCode::kAdd:
      return kernels::BinaryOp::kAdd;
    case ir::OpCode::kSub:
      return kernels::BinaryOp::kSub;
    case ir::OpCode::kMul:
      return kernels::BinaryOp::kMul;
    case ir::OpCode::kDiv:
      return kernels::BinaryOp::kDiv;
    default:
      return InvalidArgument(fmt::format("{} is not elementwise", ir::OpName(code)));
  }
}

Result<Tensor> RunElementwise(const ir::Op& op, std::span<const Tensor* const> operands) {
  ATOLL_ASSIGN_OR_RETURN(const kernels::BinaryOp bop, ToBinaryOp(op.code));
  if (operands.size() != 2) {
    return InvalidArgument(
        fmt::format("{} takes two operands, got {}", ir::OpName(op.code), operands.size()));
  }
  const Tensor* lhs = operands[0];
  const Tensor* rhs = operands[1];
  if (lhs != nullptr && rhs != nullptr) return kernels::Binary(bop, *lhs, *rhs);
  if (lhs != nullptr) return kernels::Binary(bop, *lhs, op.operands[1].scalar);
  if (rhs != nullptr) return kernels::Binary(bop, op.operands[0].scalar, *rhs);
  return InvalidArgument(fmt::format("{} of two scalars", ir::OpName(op.code)));
}

}  // namespace

CpuBackend& CpuBackend::Get() {
  static CpuBackend backend;
  return backend;
}

Result<Tensor> CpuBackend::Run(const ir::Op& op, std::span<const Tensor* const> operands) {
  if (operands.size() != op.operands.size()) {
    return Internal(fmt::format("{}: {} operand tensors for {} operands", ir::OpName(op.code),
                                operands.size(), op.operands.size()));
  }
  if (IsModelOp(op.code)) return RunModelOp(op, operands);
  switch (op.code) {
    case ir::OpCode::kAdd:
    case ir::OpCode::kSub:
    case ir::OpCode::kMul:
    case ir::OpCode::kDiv:
      return RunElementwise(op, operands);
    case ir::OpCode::kSpin:
      if (operands.size() != 1 || operands[0] == nullptr) {
        return InvalidArgument("spin takes one tensor operand");
      }
      return kernels::Spin(*operands[0], op.attr);
    case ir::OpCode::kFilter:
      if (operands.size() != 1 || operands[0] == nullptr) {
        return InvalidArgument("filter takes one tensor operand");
      }
      return kernels::Filter(*operands[0], op.attr);
    case ir::OpCode::kAllReduceSum:
      return InvalidArgument("collective ops are run by the interpreter, not by a backend");
    default:
      break;
  }
  return InvalidArgument(fmt::format("unknown op code {}", static_cast<int>(op.code)));
}

}  // namespace atl::executor
