#include "compute/fusion.h"

#include <algorithm>

#include "compute/cpu_ops.h"
#include "kernels/elementwise.h"

namespace atl::compute {

namespace {

bool InGroup(const ir::Operand& o, size_t first, size_t last) {
  return o.kind == ir::Operand::kOp && static_cast<size_t>(o.index) >= first &&
         static_cast<size_t>(o.index) <= last;
}

// A broadcast_in_dim of an f32 tensor into a static f32 type that no mesh axis cuts: its
// local block is then the whole result, which a fused group reads through strides.
bool FusibleBroadcast(const ir::FunctionDef& fn, const ir::Op& op) {
  if (op.code != ir::OpCode::kBroadcastInDim || op.attr != 0 || op.type.dtype != DType::kF32 ||
      !ir::IsStatic(op.type) || op.operands.size() != 1 ||
      op.operands[0].kind == ir::Operand::kScalar) {
    return false;
  }
  if (std::any_of(op.type.split.begin(), op.type.split.end(), [](auto s) { return s >= 0; })) {
    return false;
  }
  const ir::TensorType* from = ir::OperandType(fn, op.operands[0]);
  return from != nullptr && from->dtype == DType::kF32 && ir::IsStatic(*from) &&
         op.params.size() == op.type.shape.size() + from->shape.size();
}

// An f32 arithmetic or unary op over static operands of its own type (or scalars): its
// local block is then every operand's, element for element.
bool Fusible(const ir::FunctionDef& fn, const ir::Op& op) {
  if (FusibleBroadcast(fn, op)) return true;
  const bool unary = ir::IsUnaryOp(op.code);
  const bool arithmetic = op.code == ir::OpCode::kAdd || op.code == ir::OpCode::kSub ||
                          op.code == ir::OpCode::kMul || op.code == ir::OpCode::kDiv;
  if ((!unary && !arithmetic) || op.type.dtype != DType::kF32 || !ir::IsStatic(op.type) ||
      op.operands.size() != (unary ? 1u : 2u)) {
    return false;
  }
  bool any_tensor = false;
  for (const ir::Operand& o : op.operands) {
    if (o.kind == ir::Operand::kScalar) continue;
    const ir::TensorType* t = ir::OperandType(fn, o);
    if (t == nullptr || *t != op.type) return false;
    any_tensor = true;
  }
  return any_tensor;
}

}  // namespace

std::vector<size_t> FusedGroups(const ir::FunctionDef& fn, const std::vector<size_t>& last_use) {
  const size_t n = fn.ops.size();
  std::vector<size_t> end(n);
  for (size_t i = 0; i < n; ++i) end[i] = i;
  for (size_t a = 0; a < n;) {
    size_t b = a;
    if (!Fusible(fn, fn.ops[a])) {
      ++a;
      continue;
    }
    while (b + 1 < n && Fusible(fn, fn.ops[b + 1])) ++b;
    // Within the run [a, b], a value read after the group holding it must be made: it ends a
    // group. Ending one can strand values before it, so repeat until nothing changes.
    std::vector<bool> made(b - a + 1, false);
    made.back() = true;
    // A broadcast reads its operand whole, in the operand's shape: one made in the run must
    // be a tensor before the broadcast's group starts.
    for (size_t j = a; j <= b; ++j) {
      const ir::Operand& o = fn.ops[j].operands[0];
      if (fn.ops[j].code == ir::OpCode::kBroadcastInDim && InGroup(o, a, b)) {
        made[static_cast<size_t>(o.index) - a] = true;
      }
    }
    for (bool changed = true; changed;) {
      changed = false;
      size_t group_end = b;
      for (size_t j = b + 1; j-- > a;) {
        if (made[j - a]) group_end = j;
        if (!made[j - a] && last_use[j] > group_end) {
          made[j - a] = changed = true;
          group_end = j;
        }
      }
    }
    for (size_t start = a, j = a; j <= b; ++j) {
      if (!made[j - a]) continue;
      end[start] = j;
      start = j + 1;
    }
    a = b + 1;
  }
  return end;
}

std::vector<ir::Operand> FusedGroupInputs(const ir::FunctionDef& fn, size_t first, size_t last) {
  std::vector<ir::Operand> inputs;
  for (size_t i = first; i <= last; ++i) {
    for (const ir::Operand& o : fn.ops[i].operands) {
      if (o.kind == ir::Operand::kScalar || InGroup(o, first, last)) continue;
      if (std::find(inputs.begin(), inputs.end(), o) == inputs.end()) inputs.push_back(o);
    }
  }
  return inputs;
}

Result<Tensor> RunFusedGroup(const ir::FunctionDef& fn, size_t first, size_t last,
                             std::span<const ir::Operand> outside,
                             std::span<const Tensor* const> inputs) {
  kernels::FusedExpr expr;
  std::vector<kernels::FusedValue> node(last - first + 1);
  auto value_of = [&](const ir::Operand& o) {
    if (o.kind == ir::Operand::kScalar) return expr.Constant(static_cast<float>(o.scalar));
    if (InGroup(o, first, last)) return node[static_cast<size_t>(o.index) - first];
    const auto at = std::find(outside.begin(), outside.end(), o) - outside.begin();
    return expr.Input(static_cast<int32_t>(at));
  };
  // The result's local shape: a plain input's; with broadcasts only, the declared one (a
  // fusible broadcast's type is cut by no mesh axis, so it is the local one too).
  Shape shape = fn.ops[last].type.shape;
  for (size_t i = first; i <= last; ++i) {
    const ir::Op& op = fn.ops[i];
    if (op.code == ir::OpCode::kBroadcastInDim) continue;
    for (const ir::Operand& o : op.operands) {
      if (o.kind == ir::Operand::kScalar || InGroup(o, first, last)) continue;
      shape = inputs[std::find(outside.begin(), outside.end(), o) - outside.begin()]->shape();
    }
  }
  for (size_t i = first; i <= last; ++i) {
    const ir::Op& op = fn.ops[i];
    if (op.code == ir::OpCode::kBroadcastInDim) {
      const auto at = std::find(outside.begin(), outside.end(), op.operands[0]) - outside.begin();
      const size_t rank = op.type.shape.size();
      node[i - first] =
          expr.Broadcast(static_cast<int32_t>(at),
                         std::vector<int64_t>(op.params.begin() + rank, op.params.end()));
      continue;
    }
    if (ir::IsUnaryOp(op.code)) {
      ATOLL_ASSIGN_OR_RETURN(const kernels::UnaryFn f, UnaryFnOf(op.code));
      node[i - first] = expr.Apply(f, value_of(op.operands[0]));
    } else {
      ATOLL_ASSIGN_OR_RETURN(const kernels::BinaryFn f, BinaryFnOf(op.code));
      node[i - first] = expr.Apply(f, value_of(op.operands[0]), value_of(op.operands[1]));
    }
  }
  return kernels::EvalFused(expr, inputs, shape);
}

}  // namespace atl::compute
