#include "client/autodiff/grad_rules.h"

#include "client/autodiff/lax_emit.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

namespace atl::autodiff {

namespace {

using ir::OpCode;
using ir::Operand;

// d(max or min)/dx as jax's _balanced_eq: 1 where x alone is the result, 1/2 where y equals
// it too, 0 elsewhere.
Result<Operand> ChooserWeight(Backward& b, const Operand& x, const Operand& y, const Operand& z) {
  ATOLL_ASSIGN_OR_RETURN(const Operand x_is, b.Emit(OpCode::kEq, {x, z}));
  ATOLL_ASSIGN_OR_RETURN(const Operand y_is, b.Emit(OpCode::kEq, {y, z}));
  ATOLL_ASSIGN_OR_RETURN(const Operand zero, FilledLike(b, x, 0));
  ATOLL_ASSIGN_OR_RETURN(const Operand one, FilledLike(b, x, 1));
  ATOLL_ASSIGN_OR_RETURN(const Operand half, FilledLike(b, x, 0.5));
  ATOLL_ASSIGN_OR_RETURN(const Operand shared, b.Emit(OpCode::kSelectN, {y_is, one, half}));
  return b.Emit(OpCode::kSelectN, {x_is, zero, shared});
}

// d/dx of the unary op `code` at x (its result z), as jax's jvp rules; the constant 0 where
// the op is flat.
Result<Operand> UnarySlope(Backward& b, const ir::Op& op, const Operand& x, const Operand& z) {
  const Operand k1 = Constant(1.0);
  switch (op.code) {
    case OpCode::kAbs:
      return b.Emit(OpCode::kSign, {x});
    case OpCode::kSign:
    case OpCode::kFloor:
    case OpCode::kCeil:
    case OpCode::kRoundAway:
    case OpCode::kRoundEven:
      return Constant(0.0);
    case OpCode::kExp2:
      return b.Emit(OpCode::kMul, {z, Constant(std::numbers::ln2)});
    case OpCode::kLog1p: {
      ATOLL_ASSIGN_OR_RETURN(const Operand one_plus, b.Emit(OpCode::kAdd, {x, k1}));
      return b.Emit(OpCode::kDiv, {k1, one_plus});
    }
    case OpCode::kExpm1:
      return b.Emit(OpCode::kAdd, {z, k1});
    case OpCode::kSin:
      return b.Emit(OpCode::kCos, {x});
    case OpCode::kCos: {
      ATOLL_ASSIGN_OR_RETURN(const Operand s, b.Emit(OpCode::kSin, {x}));
      return b.Emit(OpCode::kNeg, {s});
    }
    case OpCode::kTan: {
      ATOLL_ASSIGN_OR_RETURN(const Operand z2, Times(b, z, z));
      return b.Emit(OpCode::kAdd, {z2, k1});
    }
    case OpCode::kAsin:
    case OpCode::kAcos: {  // +-1 / sqrt(1 - x^2)
      ATOLL_ASSIGN_OR_RETURN(const Operand x2, Times(b, x, x));
      ATOLL_ASSIGN_OR_RETURN(const Operand rest, b.Emit(OpCode::kSub, {k1, x2}));
      ATOLL_ASSIGN_OR_RETURN(const Operand slope, b.Emit(OpCode::kRsqrt, {rest}));
      if (op.code == OpCode::kAsin) return slope;
      return b.Emit(OpCode::kNeg, {slope});
    }
    case OpCode::kAtan:
    case OpCode::kAtanh: {  // 1 / (1 +- x^2)
      ATOLL_ASSIGN_OR_RETURN(const Operand x2, Times(b, x, x));
      ATOLL_ASSIGN_OR_RETURN(
          const Operand d,
          b.Emit(op.code == OpCode::kAtan ? OpCode::kAdd : OpCode::kSub, {k1, x2}));
      return b.Emit(OpCode::kDiv, {k1, d});
    }
    case OpCode::kSinh:
      return b.Emit(OpCode::kCosh, {x});
    case OpCode::kCosh:
      return b.Emit(OpCode::kSinh, {x});
    case OpCode::kAsinh:
    case OpCode::kAcosh: {  // 1 / sqrt(x^2 +- 1)
      ATOLL_ASSIGN_OR_RETURN(const Operand x2, Times(b, x, x));
      ATOLL_ASSIGN_OR_RETURN(
          const Operand d,
          b.Emit(op.code == OpCode::kAsinh ? OpCode::kAdd : OpCode::kSub, {x2, k1}));
      return b.Emit(OpCode::kRsqrt, {d});
    }
    case OpCode::kCbrt: {  // z^-2 / 3
      ATOLL_ASSIGN_OR_RETURN(const Operand z_2, b.Emit(OpCode::kIntegerPow, {z}, -2));
      return b.Emit(OpCode::kMul, {z_2, Constant(1.0 / 3.0)});
    }
    case OpCode::kErf:
    case OpCode::kErfc: {  // +-2 / sqrt(pi) e^(-x^2)
      ATOLL_ASSIGN_OR_RETURN(const Operand x2, Times(b, x, x));
      ATOLL_ASSIGN_OR_RETURN(const Operand minus, b.Emit(OpCode::kNeg, {x2}));
      ATOLL_ASSIGN_OR_RETURN(const Operand e, b.Emit(OpCode::kExp, {minus}));
      const double c = 2.0 / std::sqrt(std::numbers::pi);
      return b.Emit(OpCode::kMul, {e, Constant(op.code == OpCode::kErf ? c : -c)});
    }
    case OpCode::kErfInv: {  // sqrt(pi) / 2 e^(z^2)
      ATOLL_ASSIGN_OR_RETURN(const Operand z2, Times(b, z, z));
      ATOLL_ASSIGN_OR_RETURN(const Operand e, b.Emit(OpCode::kExp, {z2}));
      return b.Emit(OpCode::kMul, {e, Constant(std::sqrt(std::numbers::pi) / 2)});
    }
    default:
      return NoRuleFor(op, "its derivative is not written");
  }
}

// The dimension order a dot_general's result gives one operand's cotangent, and back: the
// result of dot_general(dy, other) has the batch dimensions, then this operand's free
// dimensions (from dy), then the other's contracted ones; `mine` maps each to this operand's.
std::vector<int64_t> InversePermutation(const std::vector<int64_t>& mine) {
  std::vector<int64_t> inverse(mine.size());
  for (size_t i = 0; i < mine.size(); ++i) inverse[static_cast<size_t>(mine[i])] = i;
  return inverse;
}

struct DotDims {
  std::vector<int64_t> contracting[2], batch[2];
};

DotDims ReadDotDims(const ir::Op& op) {
  DotDims d;
  size_t at = 0;
  const auto nc = static_cast<size_t>(op.params[at++]);
  for (size_t side = 0; side < 2; ++side) {
    d.contracting[side].assign(op.params.begin() + static_cast<ptrdiff_t>(at),
                               op.params.begin() + static_cast<ptrdiff_t>(at + nc));
    at += nc;
  }
  const auto nb = static_cast<size_t>(op.params[at++]);
  for (size_t side = 0; side < 2; ++side) {
    d.batch[side].assign(op.params.begin() + static_cast<ptrdiff_t>(at),
                         op.params.begin() + static_cast<ptrdiff_t>(at + nb));
    at += nb;
  }
  return d;
}

std::vector<int64_t> FreeDims(size_t rank, const std::vector<int64_t>& contracting,
                              const std::vector<int64_t>& batch) {
  std::vector<int64_t> free;
  for (size_t d = 0; d < rank; ++d) {
    const auto i = static_cast<int64_t>(d);
    if (std::ranges::find(contracting, i) == contracting.end() &&
        std::ranges::find(batch, i) == batch.end()) {
      free.push_back(i);
    }
  }
  return free;
}

// The cotangent of dot_general's operand `side` (0 lhs, 1 rhs).
Result<Operand> DotOperandGrad(Backward& b, const OpGrad& g, Operand dy, size_t side) {
  const DotDims d = ReadDotDims(g.op);
  const size_t other = 1 - side;
  const Operand& x = g.op.operands[side];
  const Operand& y = g.op.operands[other];
  const size_t rank[2] = {ShapeOf(b, g.op.operands[0]).size(), ShapeOf(b, g.op.operands[1]).size()};
  const std::vector<int64_t> free[2] = {FreeDims(rank[0], d.contracting[0], d.batch[0]),
                                        FreeDims(rank[1], d.contracting[1], d.batch[1])};
  const size_t nb = d.batch[0].size();
  // dy's dimensions: batch, lhs free, rhs free. Contract dy's `other` free dimensions with the
  // other operand's free ones; batch alike.
  std::vector<int64_t> dy_contract, dy_batch;
  const size_t other_free_at = nb + (other == 0 ? 0 : free[0].size());
  for (size_t i = 0; i < free[other].size(); ++i) {
    dy_contract.push_back(static_cast<int64_t>(other_free_at + i));
  }
  for (size_t i = 0; i < nb; ++i) dy_batch.push_back(static_cast<int64_t>(i));
  std::vector<int64_t> params = {static_cast<int64_t>(dy_contract.size())};
  params.insert(params.end(), dy_contract.begin(), dy_contract.end());
  params.insert(params.end(), free[other].begin(), free[other].end());
  params.push_back(static_cast<int64_t>(nb));
  params.insert(params.end(), dy_batch.begin(), dy_batch.end());
  params.insert(params.end(), d.batch[other].begin(), d.batch[other].end());
  const DType dtype = b.TypeOf(x).dtype;
  if (b.TypeOf(dy).dtype != dtype) {
    ATOLL_ASSIGN_OR_RETURN(dy,
                           b.Emit(OpCode::kConvertElementType, {dy}, static_cast<double>(dtype)));
  }
  ATOLL_ASSIGN_OR_RETURN(const Operand product, b.Emit(OpCode::kDotGeneral, {dy, y}, -1, params));
  // The product's dimensions as x's: its batch ones, its free ones, then x's contracting ones
  // in the order of the other operand's remaining (contracted) dimensions, ascending.
  std::vector<int64_t> mine(d.batch[side].begin(), d.batch[side].end());
  mine.insert(mine.end(), free[side].begin(), free[side].end());
  std::vector<int64_t> other_contracted = d.contracting[other];
  std::ranges::sort(other_contracted);
  for (int64_t c : other_contracted) {
    const auto at = std::ranges::find(d.contracting[other], c) - d.contracting[other].begin();
    mine.push_back(d.contracting[side][static_cast<size_t>(at)]);
  }
  const std::vector<int64_t> perm = InversePermutation(mine);
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity = identity && perm[i] == static_cast<int64_t>(i);
  if (identity) return product;
  return b.Emit(OpCode::kTransposeNd, {product}, 0, perm);
}

}  // namespace

Result<OperandGrads> GradLaxBinary(Backward& b, const OpGrad& g) {
  OperandGrads grads(2);
  const Operand& x = g.op.operands[0];
  const Operand& y = g.op.operands[1];
  if (!IsFloating(g.op.type.dtype)) return grads;  // comparisons, integers: no cotangent
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  switch (g.op.code) {
    case OpCode::kMax:
    case OpCode::kMin:
      for (size_t i = 0; i < 2; ++i) {
        if (!g.needed[i]) continue;
        ATOLL_ASSIGN_OR_RETURN(const Operand w,
                               ChooserWeight(b, g.op.operands[i], g.op.operands[1 - i], g.result));
        ATOLL_ASSIGN_OR_RETURN(grads[i], Times(b, dy, w));
      }
      return grads;
    case OpCode::kPow: {  // y x^(y-1); log(x) x^y, log taken as 0 where x is 0 (as jax)
      if (g.needed[0]) {
        ATOLL_ASSIGN_OR_RETURN(const Operand y1, b.Emit(OpCode::kSub, {y, Constant(1)}));
        ATOLL_ASSIGN_OR_RETURN(const Operand p, b.Emit(OpCode::kPow, {x, y1}));
        ATOLL_ASSIGN_OR_RETURN(const Operand slope, Times(b, y, p));
        ATOLL_ASSIGN_OR_RETURN(grads[0], Times(b, dy, slope));
      }
      if (g.needed[1]) {
        ATOLL_ASSIGN_OR_RETURN(const Operand zero, FilledLike(b, x, 0));
        ATOLL_ASSIGN_OR_RETURN(const Operand one, FilledLike(b, x, 1));
        ATOLL_ASSIGN_OR_RETURN(const Operand is_zero, b.Emit(OpCode::kEq, {x, zero}));
        ATOLL_ASSIGN_OR_RETURN(const Operand safe, b.Emit(OpCode::kSelectN, {is_zero, x, one}));
        ATOLL_ASSIGN_OR_RETURN(const Operand log, b.Emit(OpCode::kLog, {safe}));
        ATOLL_ASSIGN_OR_RETURN(const Operand slope, Times(b, log, g.result));
        ATOLL_ASSIGN_OR_RETURN(grads[1], Times(b, dy, slope));
      }
      return grads;
    }
    case OpCode::kAtan2: {  // (y, -x) / (x^2 + y^2)
      ATOLL_ASSIGN_OR_RETURN(const Operand x2, Times(b, x, x));
      ATOLL_ASSIGN_OR_RETURN(const Operand y2, Times(b, y, y));
      ATOLL_ASSIGN_OR_RETURN(const Operand r2, Plus(b, x2, y2));
      ATOLL_ASSIGN_OR_RETURN(const Operand scaled, Over(b, dy, r2));
      if (g.needed[0]) {
        ATOLL_ASSIGN_OR_RETURN(grads[0], Times(b, scaled, y));
      }
      if (g.needed[1]) {
        ATOLL_ASSIGN_OR_RETURN(const Operand t, Times(b, scaled, x));
        ATOLL_ASSIGN_OR_RETURN(grads[1], b.Emit(OpCode::kNeg, {t}));
      }
      return grads;
    }
    case OpCode::kRem: {  // dx = dy; dy_y = -dy * trunc(x / y)
      grads[0] = g.needed[0] ? std::optional<Operand>(dy) : std::nullopt;
      if (g.needed[1]) {
        ATOLL_ASSIGN_OR_RETURN(const Operand q, Over(b, x, y));
        ATOLL_ASSIGN_OR_RETURN(const Operand s, b.Emit(OpCode::kSign, {q}));
        ATOLL_ASSIGN_OR_RETURN(const Operand a, b.Emit(OpCode::kAbs, {q}));
        ATOLL_ASSIGN_OR_RETURN(const Operand f, b.Emit(OpCode::kFloor, {a}));
        ATOLL_ASSIGN_OR_RETURN(const Operand t, Times(b, s, f));
        ATOLL_ASSIGN_OR_RETURN(const Operand m, Times(b, dy, t));
        ATOLL_ASSIGN_OR_RETURN(grads[1], b.Emit(OpCode::kNeg, {m}));
      }
      return grads;
    }
    case OpCode::kNextafter:
      return grads;
    default:
      return NoRuleFor(g.op, "its derivative is not written");
  }
}

Result<OperandGrads> GradLaxUnary(Backward& b, const OpGrad& g) {
  OperandGrads grads(1);
  if (!g.needed[0] || !IsFloating(g.op.type.dtype)) return grads;
  ATOLL_ASSIGN_OR_RETURN(const Operand slope, UnarySlope(b, g.op, g.op.operands[0], g.result));
  if (IsConstant(slope)) return grads;  // flat: no cotangent
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(grads[0], Times(b, dy, slope));
  return grads;
}

Result<OperandGrads> GradSelectN(Backward& b, const OpGrad& g) {
  OperandGrads grads(g.op.operands.size());
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand zero, FilledLike(b, dy, 0));
  for (size_t i = 1; i < g.op.operands.size(); ++i) {
    if (!g.needed[i]) continue;
    std::vector<Operand> operands = {g.op.operands[0]};
    for (size_t j = 1; j < g.op.operands.size(); ++j) operands.push_back(i == j ? dy : zero);
    ATOLL_ASSIGN_OR_RETURN(grads[i], b.Emit(OpCode::kSelectN, std::move(operands)));
  }
  return grads;
}

Result<OperandGrads> GradConvertElementType(Backward& b, const OpGrad& g) {
  const DType from = b.TypeOf(g.op.operands[0]).dtype;
  if (!g.needed[0] || !IsFloating(from) || !IsFloating(g.op.type.dtype)) return OperandGrads(1);
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand back,
                         b.Emit(OpCode::kConvertElementType, {dy}, static_cast<double>(from)));
  return OperandGrads{back};
}

Result<OperandGrads> GradReshape(Backward& b, const OpGrad& g) {
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  const Shape shape = ShapeOf(b, g.op.operands[0]);
  ATOLL_ASSIGN_OR_RETURN(const Operand back,
                         b.Emit(OpCode::kReshape, {dy}, 0, {shape.begin(), shape.end()}));
  return OperandGrads{back};
}

Result<OperandGrads> GradBroadcastInDim(Backward& b, const OpGrad& g) {
  const Shape in = ShapeOf(b, g.op.operands[0]);
  const Shape out = g.op.type.shape;
  const std::vector<int64_t> dims(g.op.params.begin() + static_cast<ptrdiff_t>(out.size()),
                                  g.op.params.end());
  // Sum over the new dimensions and those broadcast from 1, then back to x's shape.
  std::vector<int64_t> summed;
  for (size_t d = 0; d < out.size(); ++d) {
    const auto at = std::ranges::find(dims, static_cast<int64_t>(d));
    if (at == dims.end() || (in[static_cast<size_t>(at - dims.begin())] == 1 && out[d] != 1)) {
      summed.push_back(static_cast<int64_t>(d));
    }
  }
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(Operand back, SumOver(b, dy, summed));
  if (ShapeOf(b, back) != in) {
    ATOLL_ASSIGN_OR_RETURN(back, b.Emit(OpCode::kReshape, {back}, 0, {in.begin(), in.end()}));
  }
  return OperandGrads{back};
}

Result<OperandGrads> GradTransposeNd(Backward& b, const OpGrad& g) {
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand back,
                         b.Emit(OpCode::kTransposeNd, {dy}, 0, InversePermutation(g.op.params)));
  return OperandGrads{back};
}

Result<OperandGrads> GradSlice(Backward& b, const OpGrad& g) {
  const Shape in = ShapeOf(b, g.op.operands[0]);
  const size_t n = in.size();
  std::vector<int64_t> params(3 * n);
  for (size_t d = 0; d < n; ++d) {
    const int64_t start = g.op.params[d], stride = g.op.params[2 * n + d];
    const int64_t taken = g.op.type.shape[d];
    params[d] = start;
    params[n + d] = in[d] - start - (taken - 1) * stride - 1;
    params[2 * n + d] = stride - 1;
  }
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand zero, ScalarOf(b, g.op.type.dtype, 0));
  ATOLL_ASSIGN_OR_RETURN(const Operand back, b.Emit(OpCode::kPad, {dy, zero}, 0, params));
  return OperandGrads{back};
}

Result<OperandGrads> GradConcatenate(Backward& b, const OpGrad& g) {
  const auto dim = static_cast<size_t>(g.op.attr);
  const Shape out = g.op.type.shape;
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  OperandGrads grads(g.op.operands.size());
  int64_t offset = 0;
  for (size_t i = 0; i < g.op.operands.size(); ++i) {
    const Shape piece = ShapeOf(b, g.op.operands[i]);
    if (g.needed[i]) {
      std::vector<int64_t> params(3 * out.size(), 1);
      for (size_t d = 0; d < out.size(); ++d) {
        params[d] = d == dim ? offset : 0;
        params[out.size() + d] = d == dim ? offset + piece[d] : out[d];
      }
      ATOLL_ASSIGN_OR_RETURN(grads[i], b.Emit(OpCode::kSlice, {dy}, 0, params));
    }
    offset += piece[dim];
  }
  return grads;
}

Result<OperandGrads> GradPad(Backward& b, const OpGrad& g) {
  const Shape in = ShapeOf(b, g.op.operands[0]);
  const size_t n = in.size();
  ATOLL_ASSIGN_OR_RETURN(Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand zero, ScalarOf(b, g.op.type.dtype, 0));
  // Negative padding cut x's edges off: pad them back with zeros, then take x's elements.
  std::vector<int64_t> unpad(3 * n, 0), take(3 * n);
  bool negative = false;
  for (size_t d = 0; d < n; ++d) {
    const int64_t low = g.op.params[d], high = g.op.params[n + d],
                  interior = g.op.params[2 * n + d];
    unpad[d] = std::max<int64_t>(-low, 0);
    unpad[n + d] = std::max<int64_t>(-high, 0);
    negative = negative || low < 0 || high < 0;
    take[d] = std::max<int64_t>(low, 0);
    take[n + d] = take[d] + (in[d] - 1) * (interior + 1) + 1;
    take[2 * n + d] = interior + 1;
  }
  if (negative) {
    ATOLL_ASSIGN_OR_RETURN(dy, b.Emit(OpCode::kPad, {dy, zero}, 0, unpad));
  }
  OperandGrads grads(2);
  ATOLL_ASSIGN_OR_RETURN(const Operand dx, b.Emit(OpCode::kSlice, {dy}, 0, take));
  if (g.needed[0]) grads[0] = dx;
  if (g.needed[1]) {  // the padding value's: every element of dy that is not x's
    std::vector<int64_t> all_out(g.op.type.shape.size()), all_in(n);
    for (size_t d = 0; d < all_out.size(); ++d) all_out[d] = static_cast<int64_t>(d);
    for (size_t d = 0; d < n; ++d) all_in[d] = static_cast<int64_t>(d);
    ATOLL_ASSIGN_OR_RETURN(const Operand whole, LaxDy(b, g));
    ATOLL_ASSIGN_OR_RETURN(const Operand total, SumOver(b, whole, all_out));
    ATOLL_ASSIGN_OR_RETURN(const Operand inner, SumOver(b, dx, all_in));
    ATOLL_ASSIGN_OR_RETURN(grads[1], b.Emit(OpCode::kSub, {total, inner}));
  }
  return grads;
}

Result<OperandGrads> GradRev(Backward& b, const OpGrad& g) {
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand back, b.Emit(OpCode::kRev, {dy}, 0, g.op.params));
  return OperandGrads{back};
}

Result<OperandGrads> GradReduceChooser(Backward& b, const OpGrad& g) {
  const Operand& x = g.op.operands[0];
  const ir::TensorType t = b.TypeOf(x);
  for (int64_t d : g.op.params) {
    if (t.split[static_cast<size_t>(d)] >= 0) {
      return NoRuleFor(g.op, fmt::format("dimension {} it reduces is cut over devices", d));
    }
  }
  std::vector<int64_t> kept;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (std::ranges::find(g.op.params, static_cast<int64_t>(d)) == g.op.params.end()) {
      kept.push_back(static_cast<int64_t>(d));
    }
  }
  // As jax: the cotangent shared equally among the elements equal to the result.
  ATOLL_ASSIGN_OR_RETURN(const Operand z, BroadcastBack(b, g.result, t.shape, kept));
  ATOLL_ASSIGN_OR_RETURN(const Operand hit, b.Emit(OpCode::kEq, {x, z}));
  ATOLL_ASSIGN_OR_RETURN(const Operand mask,
                         b.Emit(OpCode::kConvertElementType, {hit}, static_cast<double>(t.dtype)));
  ATOLL_ASSIGN_OR_RETURN(const Operand counts, SumOver(b, mask, g.op.params));
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand share, Over(b, dy, counts));
  ATOLL_ASSIGN_OR_RETURN(const Operand spread, BroadcastBack(b, share, t.shape, kept));
  ATOLL_ASSIGN_OR_RETURN(const Operand back, Times(b, spread, mask));
  return OperandGrads{back};
}

Result<OperandGrads> GradDotGeneral(Backward& b, const OpGrad& g) {
  OperandGrads grads(2);
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  for (size_t side = 0; side < 2; ++side) {
    if (g.needed[side]) {
      ATOLL_ASSIGN_OR_RETURN(grads[side], DotOperandGrad(b, g, dy, side));
    }
  }
  return grads;
}

Result<OperandGrads> GradIntegerPow(Backward& b, const OpGrad& g) {
  const double y = g.op.attr;
  if (!g.needed[0] || y == 0) return OperandGrads(1);
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  if (y == 1) return OperandGrads{dy};
  Operand slope = g.op.operands[0];  // y x^(y-1)
  if (y != 2) {
    ATOLL_ASSIGN_OR_RETURN(slope, b.Emit(OpCode::kIntegerPow, {slope}, y - 1));
  }
  ATOLL_ASSIGN_OR_RETURN(slope, b.Emit(OpCode::kMul, {slope, Constant(y)}));
  ATOLL_ASSIGN_OR_RETURN(const Operand back, Times(b, dy, slope));
  return OperandGrads{back};
}

}  // namespace atl::autodiff
