// The gradient rules of gather and the scatter family (scatter, scatter_add, scatter_mul,
// scatter_min, scatter_max), as jax differentiates them (jax/_src/lax/slicing.py): each
// update's cotangent is read from the result's at its window by the gather that inverts the
// scatter (same dimension numbers and mode), the operand's is the result's where no update
// replaced it.
#include <algorithm>

#include "client/autodiff/grad_rules.h"
#include "client/autodiff/lax_emit.h"

namespace atl::autodiff {

namespace {

using ir::OpCode;
using ir::Operand;

// gather's dimension numbers as scatter's (and back): the params without slice_sizes.
std::vector<int64_t> ScatterParamsOfGather(const ir::Op& gather) {
  size_t at = 0;
  for (int part = 0; part < 3; ++part) at += 1 + static_cast<size_t>(gather.params[at]);
  return {gather.params.begin(), gather.params.begin() + static_cast<ptrdiff_t>(at)};
}

// v, of the operand's shape, at each update's window of the scatter `op` (jax's gather that
// inverts a scatter): the updates' shape. In fill_or_drop mode a dropped update reads
// gather's fill value (NaN, the integer minimum), or 0 with `zero_dropped` (a float v).
Result<Operand> AtUpdates(Backward& b, const ir::Op& op, const Operand& v, bool zero_dropped) {
  std::vector<int64_t> params = op.params;
  const auto window_count = static_cast<size_t>(params[0]);
  const std::vector<int64_t> window_dims(params.begin() + 1,
                                         params.begin() + 1 + static_cast<ptrdiff_t>(window_count));
  const auto inserted_at = params.begin() + 2 + static_cast<ptrdiff_t>(window_count);
  const std::vector<int64_t> inserted(
      inserted_at, inserted_at + static_cast<ptrdiff_t>(params[1 + window_count]));
  const Shape operand = ShapeOf(b, op.operands[0]);
  const Shape updates = ShapeOf(b, op.operands[2]);
  size_t next = 0;
  for (size_t d = 0; d < operand.size(); ++d) {
    const bool was_inserted =
        std::ranges::find(inserted, static_cast<int64_t>(d)) != inserted.end();
    params.push_back(was_inserted ? 1 : updates[static_cast<size_t>(window_dims[next++])]);
  }
  ATOLL_ASSIGN_OR_RETURN(Operand taken,
                         b.Emit(OpCode::kGather, {v, op.operands[1]}, op.attr, params));
  if (op.attr == 0 || !zero_dropped) return taken;
  // NaN where an update was dropped, whose cotangent is 0: gathered ones are NaN exactly there.
  ATOLL_ASSIGN_OR_RETURN(const Operand ones, FilledLike(b, v, 1));
  ATOLL_ASSIGN_OR_RETURN(const Operand hit,
                         b.Emit(OpCode::kGather, {ones, op.operands[1]}, op.attr, params));
  ATOLL_ASSIGN_OR_RETURN(const Operand kept, b.Emit(OpCode::kEq, {hit, hit}));
  ATOLL_ASSIGN_OR_RETURN(const Operand zeros, FilledLike(b, taken, 0));
  return b.Emit(OpCode::kSelectN, {kept, zeros, taken});
}

// v where `keep`, 0 elsewhere.
Result<Operand> KeptOrZero(Backward& b, const Operand& keep, const Operand& v) {
  ATOLL_ASSIGN_OR_RETURN(const Operand zeros, FilledLike(b, v, 0));
  return b.Emit(OpCode::kSelectN, {keep, zeros, v});
}

}  // namespace

Result<OperandGrads> GradGather(Backward& b, const OpGrad& g) {
  if (!g.needed[0]) return OperandGrads(2);
  // dy added into zeros at the gathered windows: scatter_add with the same dimension
  // numbers and mode (clip, or fill's counterpart: a window that does not fit is dropped).
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand zeros, FilledLike(b, g.op.operands[0], 0));
  OperandGrads grads(2);
  ATOLL_ASSIGN_OR_RETURN(grads[0], b.Emit(OpCode::kScatterAdd, {zeros, g.op.operands[1], dy},
                                          g.op.attr, ScatterParamsOfGather(g.op)));
  return grads;
}

Result<OperandGrads> GradScatterAdd(Backward& b, const OpGrad& g) {
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  OperandGrads grads(3);
  if (g.needed[0]) grads[0] = dy;
  if (g.needed[2]) {  // jax's _scatter_add_transpose_rule
    ATOLL_ASSIGN_OR_RETURN(grads[2], AtUpdates(b, g.op, dy, true));
  }
  return grads;
}

Result<OperandGrads> GradScatter(Backward& b, const OpGrad& g) {
  // Which update each element of the result came from, as jax's _scatter_jvp finds it:
  // every update element's position (from 0) scattered the same way over -1s; where updates
  // repeat an index, the one that wins is the one whose position lands.
  const Shape updates = ShapeOf(b, g.op.operands[2]);
  int64_t count = 1;
  for (int64_t n : updates) count *= n;
  ATOLL_ASSIGN_OR_RETURN(Operand ids,
                         b.Emit(OpCode::kIota, {}, static_cast<double>(DType::kI32), {count, 0}));
  ATOLL_ASSIGN_OR_RETURN(ids, b.Emit(OpCode::kReshape, {ids}, 0, {updates.begin(), updates.end()}));
  std::vector<int64_t> full{static_cast<int64_t>(DType::kI32)};
  const Shape operand = ShapeOf(b, g.op.operands[0]);
  full.insert(full.end(), operand.begin(), operand.end());
  ATOLL_ASSIGN_OR_RETURN(const Operand none, b.Emit(OpCode::kFull, {}, -1, full));
  ATOLL_ASSIGN_OR_RETURN(const Operand from, b.Emit(OpCode::kScatter, {none, g.op.operands[1], ids},
                                                    g.op.attr, g.op.params));
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  OperandGrads grads(3);
  if (g.needed[0]) {
    ATOLL_ASSIGN_OR_RETURN(const Operand kept, b.Emit(OpCode::kEq, {from, none}));
    ATOLL_ASSIGN_OR_RETURN(grads[0], KeptOrZero(b, kept, dy));
  }
  if (g.needed[2]) {
    ATOLL_ASSIGN_OR_RETURN(const Operand landed, AtUpdates(b, g.op, from, false));
    ATOLL_ASSIGN_OR_RETURN(const Operand won, b.Emit(OpCode::kEq, {landed, ids}));
    ATOLL_ASSIGN_OR_RETURN(const Operand taken, AtUpdates(b, g.op, dy, false));
    ATOLL_ASSIGN_OR_RETURN(grads[2], KeptOrZero(b, won, taken));
  }
  return grads;
}

Result<OperandGrads> GradScatterMul(Backward& b, const OpGrad& g) {
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  OperandGrads grads(3);
  if (g.needed[0]) {  // dy times every update applied to its element
    ATOLL_ASSIGN_OR_RETURN(
        grads[0], b.Emit(OpCode::kScatterMul, {dy, g.op.operands[1], g.op.operands[2]}, g.op.attr,
                         g.op.params));
  }
  if (g.needed[2]) {
    // jax's _scatter_mul_jvp_rhs: the operand times dy at the update's window, which holds
    // where no two updates share an element (jax refuses this gradient unless told the
    // indices are unique).
    ATOLL_ASSIGN_OR_RETURN(const Operand scaled, Times(b, g.op.operands[0], dy));
    ATOLL_ASSIGN_OR_RETURN(grads[2], AtUpdates(b, g.op, scaled, true));
  }
  return grads;
}

Result<OperandGrads> GradScatterChooser(Backward& b, const OpGrad& g) {
  // As jax's _scatter_extremal_jvp: each element's cotangent is shared equally among the
  // values that tie for its result, the operand's and the updates' that reach it.
  const Operand& operand = g.op.operands[0];
  const Operand& updates = g.op.operands[2];
  const DType dtype = g.op.type.dtype;
  ATOLL_ASSIGN_OR_RETURN(const Operand result_there, AtUpdates(b, g.op, g.result, false));
  ATOLL_ASSIGN_OR_RETURN(const Operand won, b.Emit(OpCode::kEq, {updates, result_there}));
  ATOLL_ASSIGN_OR_RETURN(const Operand won_count,
                         b.Emit(OpCode::kConvertElementType, {won}, static_cast<double>(dtype)));
  ATOLL_ASSIGN_OR_RETURN(const Operand zeros, FilledLike(b, operand, 0));
  ATOLL_ASSIGN_OR_RETURN(
      const Operand winners,
      b.Emit(OpCode::kScatterAdd, {zeros, g.op.operands[1], won_count}, g.op.attr, g.op.params));
  ATOLL_ASSIGN_OR_RETURN(const Operand kept, b.Emit(OpCode::kEq, {operand, g.result}));
  ATOLL_ASSIGN_OR_RETURN(const Operand kept_count,
                         b.Emit(OpCode::kConvertElementType, {kept}, static_cast<double>(dtype)));
  ATOLL_ASSIGN_OR_RETURN(const Operand ties, Plus(b, winners, kept_count));
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand share, Over(b, dy, ties));
  OperandGrads grads(3);
  if (g.needed[0]) {
    ATOLL_ASSIGN_OR_RETURN(grads[0], KeptOrZero(b, kept, share));
  }
  if (g.needed[2]) {
    ATOLL_ASSIGN_OR_RETURN(const Operand taken, AtUpdates(b, g.op, share, true));
    ATOLL_ASSIGN_OR_RETURN(grads[2], KeptOrZero(b, won, taken));
  }
  return grads;
}

}  // namespace atl::autodiff
