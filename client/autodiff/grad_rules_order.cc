// The gradient rules of the order-dependent reductions: reduce_prod, cumprod, cummax, cummin
// and sort. Each is exact where jax's is (no division by an element, which may be 0):
// products of the other elements come from exclusive running products, and a running
// reduction's cotangent from the pairs (i, j) of positions along its axis, output i taking
// input j, a tensor n times its operand (an axis of n).
#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "client/autodiff/grad_rules.h"
#include "client/autodiff/lax_emit.h"

namespace atl::autodiff {

namespace {

using ir::OpCode;
using ir::Operand;
using Dims = std::vector<int64_t>;

Result<Operand> IotaOf(Backward& b, const Shape& shape, size_t dim) {
  Dims params(shape.begin(), shape.end());
  params.push_back(static_cast<int64_t>(dim));
  return b.Emit(OpCode::kIota, {}, static_cast<double>(DType::kI32), std::move(params));
}

Status NotCut(Backward& b, const ir::Op& op, const Dims& dims) {
  const ir::TensorType t = b.TypeOf(op.operands[0]);
  for (int64_t d : dims) {
    if (t.split[static_cast<size_t>(d)] >= 0) {
      return NoRuleFor(op, fmt::format("dimension {} it runs along is cut over devices", d));
    }
  }
  return Status::Ok();
}

// v's elements shifted one place along `axis` (toward its end, or its start with `back`),
// `fill` coming in.
Result<Operand> Shifted(Backward& b, const Operand& v, size_t axis, bool back, double fill) {
  const size_t n = ShapeOf(b, v).size();
  Dims pad(3 * n, 0);
  pad[axis] = back ? -1 : 1;
  pad[n + axis] = back ? 1 : -1;
  ATOLL_ASSIGN_OR_RETURN(const Operand value, ScalarOf(b, b.TypeOf(v).dtype, fill));
  return b.Emit(OpCode::kPad, {v, value}, 0, std::move(pad));
}

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

Dims InverseOf(const Dims& perm) {
  Dims inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = i;
  return inverse;
}

}  // namespace

Result<OperandGrads> GradReduceProd(Backward& b, const OpGrad& g) {
  const Operand& x = g.op.operands[0];
  const Shape shape = ShapeOf(b, x);
  Dims reduced = g.op.params;
  std::ranges::sort(reduced);
  ATOLL_RETURN_IF_ERROR(NotCut(b, g.op, reduced));
  // x as [kept..., n], the reduced dimensions last and merged: each element's cotangent is dy
  // times the product of the others in its row, the running products from either side.
  Dims perm;
  Shape flat;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (std::ranges::find(reduced, static_cast<int64_t>(d)) != reduced.end()) continue;
    perm.push_back(static_cast<int64_t>(d));
    flat.push_back(shape[d]);
  }
  Dims kept(perm.size());
  std::iota(kept.begin(), kept.end(), 0);
  int64_t n = 1;
  for (int64_t d : reduced) n *= shape[static_cast<size_t>(d)];
  perm.insert(perm.end(), reduced.begin(), reduced.end());
  flat.push_back(n);
  const bool moves = !std::ranges::is_sorted(perm);
  Operand rows = x;
  if (moves) {
    ATOLL_ASSIGN_OR_RETURN(rows, b.Emit(OpCode::kTransposeNd, {x}, 0, perm));
  }
  const Shape moved = ShapeOf(b, rows);
  ATOLL_ASSIGN_OR_RETURN(rows, b.Emit(OpCode::kReshape, {rows}, 0, Dims(flat.begin(), flat.end())));
  const size_t last = kept.size();
  ATOLL_ASSIGN_OR_RETURN(const Operand from_start,
                         b.Emit(OpCode::kCumprod, {rows}, 0, Dims{static_cast<int64_t>(last)}));
  ATOLL_ASSIGN_OR_RETURN(const Operand from_end,
                         b.Emit(OpCode::kCumprod, {rows}, 1, Dims{static_cast<int64_t>(last)}));
  ATOLL_ASSIGN_OR_RETURN(const Operand before, Shifted(b, from_start, last, false, 1));
  ATOLL_ASSIGN_OR_RETURN(const Operand after, Shifted(b, from_end, last, true, 1));
  ATOLL_ASSIGN_OR_RETURN(const Operand others, Times(b, before, after));
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand spread, BroadcastBack(b, dy, flat, kept));
  ATOLL_ASSIGN_OR_RETURN(Operand back, Times(b, spread, others));
  ATOLL_ASSIGN_OR_RETURN(back,
                         b.Emit(OpCode::kReshape, {back}, 0, Dims(moved.begin(), moved.end())));
  if (moves) {
    ATOLL_ASSIGN_OR_RETURN(back, b.Emit(OpCode::kTransposeNd, {back}, 0, InverseOf(perm)));
  }
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
