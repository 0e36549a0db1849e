#include "client/autodiff/backward.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace atl::autodiff {

namespace {

// The mesh axes a type cuts some dimension along, a bit each.
uint32_t CutAxes(const ir::TensorType& t) {
  uint32_t axes = 0;
  for (int32_t axis : t.split) {
    if (axis >= 0 && axis < 32) axes |= 1u << axis;
  }
  return axes;
}

std::vector<int> AxisList(uint32_t axes) {
  std::vector<int> list;
  for (int a = 0; a < 32; ++a) {
    if ((axes >> a) & 1u) list.push_back(a);
  }
  return list;
}

}  // namespace

Backward::Backward(ir::FunctionDef& def, int mesh_axes)
    : def_(def),
      mesh_axes_(mesh_axes >= 32 ? ~0u : (1u << mesh_axes) - 1),
      partial_(def.ops.size(), 0) {}

ir::TensorType Backward::TypeOf(const ir::Operand& v) const { return *ir::OperandType(def_, v); }

uint32_t Backward::PartialAxes(const ir::Operand& v) const {
  return v.kind == ir::Operand::kOp ? partial_[v.index] : 0;
}

Result<ir::Operand> Backward::Emit(ir::OpCode code, std::vector<ir::Operand> operands,
                                   double attr) {
  ir::Op op{code, std::move(operands), attr, {}};
  ATOLL_ASSIGN_OR_RETURN(op.type, ir::InferType(def_, op));
  uint32_t partial = 0;
  for (const ir::Operand& o : op.operands) {
    if (IsConstant(o)) continue;
    partial |= PartialAxes(o) | (CutAxes(TypeOf(o)) & ~CutAxes(op.type));
  }
  if (code == ir::OpCode::kAllReduceSum) partial = 0;
  def_.ops.push_back(std::move(op));
  partial_.push_back(partial);
  return ir::Operand{ir::Operand::kOp, static_cast<int32_t>(def_.ops.size()) - 1, 0.0};
}

Result<ir::Operand> Backward::Materialize(const ir::Operand& dy, const ir::Operand& like) {
  if (!IsConstant(dy)) return dy;
  return Emit(ir::OpCode::kFillLike, {like}, dy.scalar);
}

Result<ir::Operand> Backward::Complete(const ir::Operand& v) {
  const uint32_t partial = PartialAxes(v);
  if (partial == 0) return v;
  const ir::TensorType t = TypeOf(v);
  if (!ir::IsReplicated(t) || (partial & mesh_axes_) != mesh_axes_) {
    return InvalidArgument(fmt::format(
        "a gradient {} is a partial sum over mesh axes [{}] of a function whose mesh has {} "
        "axes; all_reduce_sum completes only replicated partials over every axis (it sums "
        "over every device)",
        ir::Describe(t), fmt::join(AxisList(partial), ","), AxisList(mesh_axes_).size()));
  }
  return Emit(ir::OpCode::kAllReduceSum, {v});
}

Result<ir::Operand> Backward::Sum(const ir::Operand& a, const ir::Operand& b) {
  if (IsConstant(a) && IsConstant(b)) return Constant(a.scalar + b.scalar);
  if (IsConstant(a) || IsConstant(b)) {
    const ir::Operand& c = IsConstant(a) ? a : b;
    ATOLL_ASSIGN_OR_RETURN(const ir::Operand v, Complete(IsConstant(a) ? b : a));
    if (c.scalar == 0) return v;
    return Emit(ir::OpCode::kAdd, {v, c});
  }
  if (PartialAxes(a) == PartialAxes(b)) return Emit(ir::OpCode::kAdd, {a, b});
  ATOLL_ASSIGN_OR_RETURN(const ir::Operand whole_a, Complete(a));
  ATOLL_ASSIGN_OR_RETURN(const ir::Operand whole_b, Complete(b));
  return Emit(ir::OpCode::kAdd, {whole_a, whole_b});
}

Result<ir::Operand> Backward::Scale(const ir::Operand& v, double s) {
  if (IsConstant(v)) return Constant(v.scalar * s);
  if (s == 1) return v;
  return Emit(ir::OpCode::kMul, {v, Constant(s)});
}

}  // namespace atl::autodiff
