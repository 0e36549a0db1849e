// The gradient rules of the runtime's own rows of common/ir/ops.def (GradRule column): from the
// cotangent dy of an op's result, the cotangents of its operands, each typed and cut as its
// operand. Sums over a dimension cut over devices come out partial (Backward::Emit marks
// them); the engine (grad.cc) completes them where they meet whole values and at the end.
#include "client/autodiff/grad_rules.h"

#include <algorithm>
#include <iterator>

namespace atl::autodiff {

namespace {

using ir::OpCode;
using ir::Operand;

// The op's result cotangent as a value.
Result<Operand> Dy(Backward& b, const OpGrad& g) { return b.Materialize(g.dy, g.result); }

// v summed over its first n dimensions (`like` has v's type). A constant over static
// dimensions stays one: the number times their extent.
Result<Operand> SumLeading(Backward& b, Operand v, const Operand& like, size_t n) {
  if (IsConstant(v)) {
    const ir::TensorType t = b.TypeOf(like);
    double extent = 1;
    bool known = true;
    for (size_t d = 0; d < n; ++d) {
      known = known && t.shape[d] != kDynamicDim;
      extent *= static_cast<double>(t.shape[d]);
    }
    if (known) return Constant(v.scalar * extent);
    ATOLL_ASSIGN_OR_RETURN(v, b.Materialize(v, like));
  }
  for (size_t d = 0; d < n; ++d) {
    ATOLL_ASSIGN_OR_RETURN(v, b.Emit(OpCode::kReduceSum, {v}, 0));
  }
  return v;
}

// dy * v, for v of the result's type or a [] value (broadcast over it).
Result<Operand> Product(Backward& b, const OpGrad& g, const Operand& v) {
  if (IsConstant(g.dy) && b.TypeOf(v) == b.TypeOf(g.result)) return b.Scale(v, g.dy.scalar);
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, Dy(b, g));
  return b.Emit(OpCode::kMul, {dy, v});
}

// The cotangents of an arithmetic op, given each operand's share `c` of the result's
// cotangent: an operand that is a [] tensor broadcast over a larger result sums its share.
Result<OperandGrads> ArithmeticGrads(Backward& b, const OpGrad& g, std::optional<Operand> (&c)[2]) {
  OperandGrads grads(2);
  const size_t rank = b.TypeOf(g.result).shape.size();
  for (size_t i = 0; i < 2; ++i) {
    if (!g.needed[i] || !c[i]) continue;
    if (rank > 0 && b.TypeOf(g.op.operands[i]).shape.empty()) {
      ATOLL_ASSIGN_OR_RETURN(grads[i], SumLeading(b, *c[i], g.result, rank));
    } else {
      grads[i] = c[i];
    }
  }
  return grads;
}

}  // namespace

// The rules of the rows (client/autodiff/grad_rules.h declares them from the table), outside
// the anonymous namespace where those declarations are.

Result<OperandGrads> GradAdd(Backward& b, const OpGrad& g) {
  std::optional<Operand> c[2] = {g.dy, g.dy};
  return ArithmeticGrads(b, g, c);
}

Result<OperandGrads> GradSub(Backward& b, const OpGrad& g) {
  std::optional<Operand> c[2] = {g.dy, std::nullopt};
  if (g.needed[1]) {
    ATOLL_ASSIGN_OR_RETURN(c[1], b.Scale(g.dy, -1));
  }
  return ArithmeticGrads(b, g, c);
}

Result<OperandGrads> GradMul(Backward& b, const OpGrad& g) {
  std::optional<Operand> c[2];
  for (size_t i = 0; i < 2; ++i) {
    if (!g.needed[i]) continue;
    const Operand& other = g.op.operands[1 - i];
    if (IsConstant(other)) {
      ATOLL_ASSIGN_OR_RETURN(c[i], b.Scale(g.dy, other.scalar));
    } else {
      ATOLL_ASSIGN_OR_RETURN(c[i], Product(b, g, other));
    }
  }
  return ArithmeticGrads(b, g, c);
}

// y = a / b: da = dy / b, db = -dy y / b.
Result<OperandGrads> GradDiv(Backward& b, const OpGrad& g) {
  const Operand& divisor = g.op.operands[1];
  std::optional<Operand> c[2];
  if (g.needed[0]) {
    if (IsConstant(divisor)) {
      ATOLL_ASSIGN_OR_RETURN(c[0], b.Scale(g.dy, 1 / divisor.scalar));
    } else {
      ATOLL_ASSIGN_OR_RETURN(const Operand dy, Dy(b, g));
      ATOLL_ASSIGN_OR_RETURN(c[0], b.Emit(OpCode::kDiv, {dy, divisor}));
    }
  }
  if (g.needed[1]) {
    ATOLL_ASSIGN_OR_RETURN(const Operand dy_y, Product(b, g, g.result));
    ATOLL_ASSIGN_OR_RETURN(const Operand quotient, b.Emit(OpCode::kDiv, {dy_y, divisor}));
    ATOLL_ASSIGN_OR_RETURN(c[1], b.Scale(quotient, -1));
  }
  return ArithmeticGrads(b, g, c);
}

// C = op(A) op(B): d op(A) = dC op(B)^T and d op(B) = op(A)^T dC, each transposed back
// where its operand was taken transposed, as matmul's own flags.
Result<OperandGrads> GradMatmul(Backward& b, const OpGrad& g) {
  const bool ta = ir::MatmulTransposeA(g.op.attr);
  const bool tb = ir::MatmulTransposeB(g.op.attr);
  const Operand& a = g.op.operands[0];
  const Operand& w = g.op.operands[1];
  ATOLL_ASSIGN_OR_RETURN(const Operand dc, Dy(b, g));
  OperandGrads grads(2);
  if (g.needed[0]) {
    ATOLL_ASSIGN_OR_RETURN(grads[0],
                           ta ? b.Emit(OpCode::kMatmul, {w, dc}, ir::MatmulAttr(tb, true))
                              : b.Emit(OpCode::kMatmul, {dc, w}, ir::MatmulAttr(false, !tb)));
  }
  if (g.needed[1]) {
    ATOLL_ASSIGN_OR_RETURN(grads[1],
                           tb ? b.Emit(OpCode::kMatmul, {dc, a}, ir::MatmulAttr(true, ta))
                              : b.Emit(OpCode::kMatmul, {a, dc}, ir::MatmulAttr(!ta, false)));
  }
  return grads;
}

// spin: the identity (the device's time is the forward's alone).
Result<OperandGrads> GradIdentity(Backward&, const OpGrad& g) { return OperandGrads{g.dy}; }

// all_reduce_sum: every device's partial x adds to y, so its cotangent is dy, whole.
Result<OperandGrads> GradAllReduceSum(Backward& b, const OpGrad& g) {
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, b.Complete(g.dy));
  return OperandGrads{dy};
}

// A result that does not depend on its operand's values (fill_like): no cotangent.
Result<OperandGrads> GradConstant(Backward&, const OpGrad& g) {
  return OperandGrads(g.op.operands.size());
}

Result<OperandGrads> GradUnary(Backward& b, const OpGrad& g) {
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, Dy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand dx, b.Emit(OpCode::kUnaryGrad, {dy, g.op.operands[0]},
                                                  static_cast<double>(g.op.code)));
  return OperandGrads{dx};
}

// y = x + bias on every row: dx = dy, dbias = dy summed over the rows (partial when cut).
Result<OperandGrads> GradBiasAdd(Backward& b, const OpGrad& g) {
  OperandGrads grads = {g.dy, std::nullopt};
  if (g.needed[1]) {
    const size_t rows = b.TypeOf(g.result).shape.size() - 1;
    ATOLL_ASSIGN_OR_RETURN(grads[1], SumLeading(b, g.dy, g.result, rows));
  }
  return grads;
}

// dx = dy repeated along the summed dimension; a constant stays one.
Result<OperandGrads> GradReduceSum(Backward& b, const OpGrad& g) {
  if (IsConstant(g.dy)) return OperandGrads{g.dy};
  ATOLL_ASSIGN_OR_RETURN(const Operand dx,
                         b.Emit(OpCode::kReduceSumGrad, {g.dy, g.op.operands[0]}, g.op.attr));
  return OperandGrads{dx};
}

Result<OperandGrads> GradSoftmax(Backward& b, const OpGrad& g) {
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, Dy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand dx, b.Emit(OpCode::kSoftmaxGrad, {dy, g.result}));
  return OperandGrads{dx};
}

// layer_norm(x, gamma, beta): the three gradient ops (dgamma, dbeta partial when x is cut).
Result<OperandGrads> GradLayerNorm(Backward& b, const OpGrad& g) {
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, Dy(b, g));
  const std::vector<Operand> operands = {dy, g.op.operands[0], g.op.operands[1]};
  const OpCode codes[] = {OpCode::kLayerNormGradX, OpCode::kLayerNormGradGamma,
                          OpCode::kLayerNormGradBeta};
  OperandGrads grads(3);
  for (size_t i = 0; i < 3; ++i) {
    if (!g.needed[i]) continue;
    ATOLL_ASSIGN_OR_RETURN(grads[i], b.Emit(codes[i], operands, g.op.attr));
  }
  return grads;
}

// The loss's gradient with respect to the logits (cross_entropy_grad: the global mean's
// share of each device's rows) times dy; the labels are integers.
Result<OperandGrads> GradCrossEntropyLoss(Backward& b, const OpGrad& g) {
  OperandGrads grads(2);
  if (!g.needed[0]) return grads;
  ATOLL_ASSIGN_OR_RETURN(const Operand dlogits,
                         b.Emit(OpCode::kCrossEntropyGrad, {g.op.operands[0], g.op.operands[1]}));
  if (IsConstant(g.dy)) {
    ATOLL_ASSIGN_OR_RETURN(grads[0], b.Scale(dlogits, g.dy.scalar));
  } else {
    ATOLL_ASSIGN_OR_RETURN(grads[0], b.Emit(OpCode::kMul, {dlogits, g.dy}));
  }
  return grads;
}

Result<OperandGrads> GradTranspose(Backward& b, const OpGrad& g) {
  if (IsConstant(g.dy)) return OperandGrads{g.dy};
  ATOLL_ASSIGN_OR_RETURN(const Operand dx, b.Emit(OpCode::kTranspose, {g.dy}));
  return OperandGrads{dx};
}

// y = x w_e on each device's rows: dx = dy w_e^T, dw_e = x^T dy over the device's own rows
// (each device's group, cut as w: no partial).
Result<OperandGrads> GradGroupedMatmul(Backward& b, const OpGrad& g) {
  const bool transposed = g.op.attr == 1;
  const Operand& x = g.op.operands[0];
  const Operand& w = g.op.operands[1];
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, Dy(b, g));
  OperandGrads grads(2);
  if (g.needed[0]) {
    ATOLL_ASSIGN_OR_RETURN(grads[0], b.Emit(OpCode::kGroupedMatmul, {dy, w}, transposed ? 0 : 1));
  }
  if (g.needed[1]) {
    const auto groups = static_cast<double>(b.TypeOf(w).shape[0]);
    ATOLL_ASSIGN_OR_RETURN(grads[1], transposed
                                         ? b.Emit(OpCode::kGroupedWeightGrad, {dy, x}, groups)
                                         : b.Emit(OpCode::kGroupedWeightGrad, {x, dy}, groups));
  }
  return grads;
}

// Rows added into rows ids[i]: each row's cotangent is row ids[i] of dy.
Result<OperandGrads> GradScatterAddRows(Backward& b, const OpGrad& g) {
  OperandGrads grads(2);
  if (!g.needed[0]) return grads;
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, Dy(b, g));
  ATOLL_ASSIGN_OR_RETURN(grads[0], b.Emit(OpCode::kGatherRows, {dy, g.op.operands[1]}));
  return grads;
}

// Rows table[ids[i]]: the table's cotangent adds each row's dy into row ids[i] (partial when
// the ids are cut).
Result<OperandGrads> GradGatherRows(Backward& b, const OpGrad& g) {
  OperandGrads grads(2);
  if (!g.needed[0]) return grads;
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, Dy(b, g));
  const auto rows = static_cast<double>(b.TypeOf(g.op.operands[0]).shape[0]);
  ATOLL_ASSIGN_OR_RETURN(grads[0], b.Emit(OpCode::kScatterAddRows, {dy, g.op.operands[1]}, rows));
  return grads;
}

// Each row's k largest values: their cotangents go back to the positions chosen.
Result<OperandGrads> GradTopKValues(Backward& b, const OpGrad& g) {
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, Dy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand dx,
                         b.Emit(OpCode::kTopKGrad, {dy, g.op.operands[0]}, g.op.attr));
  return OperandGrads{dx};
}

Result<OperandGrads> GradColumn(Backward& b, const OpGrad& g) {
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, Dy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand dx,
                         b.Emit(OpCode::kColumnGrad, {dy, g.op.operands[0]}, g.op.attr));
  return OperandGrads{dx};
}

// The collectives. A collective's attr is its mesh axis; its rule completes a partial cotangent
// itself where it needs a whole one (the engine does that only for the ops run on each device's
// block).

namespace {

int AxisOf(const OpGrad& g) { return static_cast<int>(g.op.attr); }  // the type rule checked it

// v, whole along mesh axis `axis`, as a value partial along it: member `root` holds v and the
// others zeros (a collective_permute of the root to itself), so that a sum over the group
// counts v once.
Result<Operand> ShareOn(Backward& b, const Operand& v, int axis, int64_t root) {
  ATOLL_ASSIGN_OR_RETURN(const Operand share,
                         b.Emit(OpCode::kCollectivePermute, {v}, axis, {root, root}));
  b.AddPartial(share, 1u << axis);
  return share;
}

}  // namespace

// y = the group's sum / n: dx = dy / n. n, the group's size, is the slice's, which Grad does
// not know: it is counted, as the all_reduce_sum of ones along the op's axis.
Result<OperandGrads> GradAllReduceMean(Backward& b, const OpGrad& g) {
  ATOLL_ASSIGN_OR_RETURN(const Operand whole, b.Complete(g.dy));
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, b.Materialize(whole, g.result));
  ATOLL_ASSIGN_OR_RETURN(const Operand ones, b.Emit(OpCode::kFillLike, {g.result}, 1));
  ATOLL_ASSIGN_OR_RETURN(const Operand n, b.Emit(OpCode::kAllReduceSum, {ones}, g.op.attr));
  ATOLL_ASSIGN_OR_RETURN(const Operand dx, b.Emit(OpCode::kDiv, {dy, n}));
  return OperandGrads{dx};
}

// y = the group's blocks joined: each member's x gets its block of dy, which reduce_scatter
// cuts out of the group's sum. A dy partial along the axis is that sum's shares already; a
// whole one is first made the root's share alone.
Result<OperandGrads> GradAllGather(Backward& b, const OpGrad& g) {
  const int axis = AxisOf(g);
  const ir::TensorType x = b.TypeOf(g.op.operands[0]);
  const auto dim = std::find(x.split.begin(), x.split.end(), axis) - x.split.begin();
  ATOLL_ASSIGN_OR_RETURN(Operand dy, Dy(b, g));
  if ((b.PartialAxes(dy) & (1u << axis)) == 0) {
    ATOLL_ASSIGN_OR_RETURN(dy, ShareOn(b, dy, axis, 0));
  }
  ATOLL_ASSIGN_OR_RETURN(const Operand dx, b.Emit(OpCode::kReduceScatter, {dy}, axis, {dim}));
  return OperandGrads{dx};
}

// y = the group's sum, cut: every member's x gets the whole dy.
Result<OperandGrads> GradReduceScatter(Backward& b, const OpGrad& g) {
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, Dy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand dx, b.Emit(OpCode::kAllGather, {dy}, g.op.attr));
  return OperandGrads{dx};
}

// A layout move: the reverse all_to_all, from the dimension y is cut on back to x's.
Result<OperandGrads> GradAllToAll(Backward& b, const OpGrad& g) {
  const ir::TensorType x = b.TypeOf(g.op.operands[0]);
  const auto from = std::find(x.split.begin(), x.split.end(), AxisOf(g)) - x.split.begin();
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, Dy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand dx, b.Emit(OpCode::kAllToAll, {dy}, g.op.attr, {from}));
  return OperandGrads{dx};
}

// Every member gets the root's x: the root's x gets the sum of dy over the group, the other
// members' nothing (a share partial along the axis, whole where it is summed).
Result<OperandGrads> GradBroadcast(Backward& b, const OpGrad& g) {
  const int axis = AxisOf(g);
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, Dy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand sum, b.Complete(dy, 1u << axis));
  ATOLL_ASSIGN_OR_RETURN(const Operand dx, ShareOn(b, sum, axis, g.op.params[0]));
  return OperandGrads{dx};
}

// Each target gets its source's x: the inverse permutation sends each target's dy back to its
// source, and a member that sends nothing gets zeros. Shares of a partial along the axis
// would move apart from their sum: it is completed first.
Result<OperandGrads> GradCollectivePermute(Backward& b, const OpGrad& g) {
  const int axis = AxisOf(g);
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, Dy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand whole, b.Complete(dy, 1u << axis));
  std::vector<int64_t> inverse;
  for (size_t i = 0; i + 1 < g.op.params.size(); i += 2) {
    inverse.push_back(g.op.params[i + 1]);
    inverse.push_back(g.op.params[i]);
  }
  ATOLL_ASSIGN_OR_RETURN(
      const Operand dx, b.Emit(OpCode::kCollectivePermute, {whole}, g.op.attr, std::move(inverse)));
  return OperandGrads{dx};
}

// cast: dy cast back to x's dtype (a constant stands for a tensor of any dtype).
Result<OperandGrads> GradCast(Backward& b, const OpGrad& g) {
  if (IsConstant(g.dy)) return OperandGrads{g.dy};
  const auto dtype = static_cast<double>(b.TypeOf(g.op.operands[0]).dtype);
  ATOLL_ASSIGN_OR_RETURN(const Operand dx, b.Emit(OpCode::kCast, {g.dy}, dtype));
  return OperandGrads{dx};
}

namespace {

// A row without a rule: ATOLL_NO_GRAD("why") in the table.
struct NoGrad {
  std::string_view why;
};
constexpr GradRow RowOf(OpCode code, GradRule rule) { return {code, rule, {}}; }
constexpr GradRow RowOf(OpCode code, NoGrad no) { return {code, nullptr, no.why}; }

constexpr GradRow kGradTable[] = {
#define ATOLL_OP(Name, name, operands, TypeRule, CpuKernel, GradRule) \
  RowOf(OpCode::k##Name, GradRule),
#define ATOLL_NO_GRAD(why) \
  NoGrad { why }
#include "common/ir/ops.def"
};
static_assert(std::size(kGradTable) == ir::kNumOpCodes,
              "common/ir/ops.def's GradRule column needs one entry per op");

}  // namespace

const GradRow& GradRowOf(ir::OpCode code) { return kGradTable[static_cast<size_t>(code)]; }

}  // namespace atl::autodiff
