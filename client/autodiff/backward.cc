#include "client/autodiff/backward.h"

#include <fmt/format.h>

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

Backward::Backward(ir::FunctionDef& def) : def_(def), partial_(def.ops.size(), 0) {}

ir::TensorType Backward::TypeOf(const ir::Operand& v) const { return *ir::OperandType(def_, v); }

uint32_t Backward::PartialAxes(const ir::Operand& v) const {
  return v.kind == ir::Operand::kOp ? partial_[v.index] : 0;
}

Result<ir::Operand> Backward::Emit(ir::OpCode code, std::vector<ir::Operand> operands, double attr,
                                   std::vector<int64_t> params) {
  ir::Op op{code, std::move(operands), attr, {}, std::move(params)};
  ATOLL_ASSIGN_OR_RETURN(op.type, ir::InferType(def_, op));
  // A structured op's results are what its bodies give on each shard (their types say how
  // they are cut), and the rules hand it whole operands: none of them is partial.
  const bool collective = ir::IsCollective(code);
  const bool structured = ir::IsStructured(code) || code == ir::OpCode::kTupleElement;
  uint32_t partial = 0;
  for (const ir::Operand& o : op.operands) {
    if (IsConstant(o) || structured) continue;
    partial |= PartialAxes(o);
    if (!collective) partial |= CutAxes(TypeOf(o)) & ~CutAxes(op.type);
  }
  if (code == ir::OpCode::kAllReduceSum || code == ir::OpCode::kReduceScatter) {
    const auto axis = static_cast<int32_t>(attr);  // the rule checked it
    partial &= axis == ir::kWholeSlice ? 0u : ~(1u << axis);
  }
  def_.ops.push_back(std::move(op));
  partial_.push_back(partial);
  return ir::Operand{ir::Operand::kOp, static_cast<int32_t>(def_.ops.size()) - 1, 0.0};
}

void Backward::AddPartial(const ir::Operand& v, uint32_t axes) { partial_.at(v.index) |= axes; }

Result<ir::Operand> Backward::Materialize(const ir::Operand& dy, const ir::Operand& like) {
  if (!IsConstant(dy)) return dy;
  return Emit(ir::OpCode::kFillLike, {like}, dy.scalar);
}

Result<ir::Operand> Backward::Complete(const ir::Operand& v, uint32_t axes) {
  ir::Operand whole = v;
  for (int axis : AxisList(PartialAxes(v) & axes)) {
    ATOLL_ASSIGN_OR_RETURN(whole, Emit(ir::OpCode::kAllReduceSum, {whole}, axis));
  }
  return whole;
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

Status Backward::AddResultCotangent(const ir::Operand& structured, int64_t k,
                                    const ir::Operand& c) {
  std::map<int64_t, ir::Operand>& results = results_[structured.index];
  const auto it = results.find(k);
  if (it == results.end()) {
    results.emplace(k, c);
    return Status::Ok();
  }
  ATOLL_ASSIGN_OR_RETURN(it->second, Sum(it->second, c));
  return Status::Ok();
}

std::optional<ir::Operand> Backward::ResultCotangent(const ir::Operand& structured,
                                                     int64_t k) const {
  const auto op = results_.find(structured.index);
  if (op == results_.end()) return std::nullopt;
  const auto it = op->second.find(k);
  if (it == op->second.end()) return std::nullopt;
  return it->second;
}

bool Backward::HasResultCotangents(const ir::Operand& structured) const {
  return results_.contains(structured.index);
}

int64_t Backward::AddBody(ir::FunctionDef body) {
  def_.bodies.push_back(std::move(body));
  return static_cast<int64_t>(def_.bodies.size()) - 1;
}

Status Backward::SetBody(const ir::Operand& structured, size_t at, int64_t index) {
  ir::Op& op = def_.ops.at(static_cast<size_t>(structured.index));
  ir::Op changed = op;
  changed.params.at(at) = index;
  ATOLL_ASSIGN_OR_RETURN(const ir::TensorType type, ir::InferType(def_, changed));
  if (type != op.type) {
    return Internal(fmt::format("{}: the new body gives a first result {}, the op's is {}",
                                ir::OpName(op.code), ir::Describe(type), ir::Describe(op.type)));
  }
  op = std::move(changed);
  return Status::Ok();
}

}  // namespace atl::autodiff
