// The gradient rule of reduce_prod (the running reductions' are in ops/cumulative.cc, sort's
// in ops/sort.cc). Each is exact where jax's is (no division by an
// element, which may be 0): products of the other elements come from exclusive running
// products.
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

}  // namespace atl::autodiff
