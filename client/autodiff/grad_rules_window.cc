// The gradient rules of jax.lax's windowed primitives (convolution, window reductions,
// dynamic slices) and of clamp and reduce_precision, as jax transposes them
// (jax/_src/lax/convolution.py, windowed_reductions.py, slicing.py):
// each cotangent is another primitive of the IR, so it runs and shards as that one does.
#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "client/autodiff/grad_rules.h"
#include "client/autodiff/lax_emit.h"

namespace atl::autodiff {

namespace {

using ir::OpCode;
using ir::Operand;
using Ints = std::vector<int64_t>;

// The params from `at`, `n` of them.
Ints Take(const ir::Op& op, size_t at, size_t n) {
  return Ints(op.params.begin() + static_cast<ptrdiff_t>(at),
              op.params.begin() + static_cast<ptrdiff_t>(at + n));
}

// A size after dilation (0 stays 0), as jax's _dilate_shape.
int64_t Dilated(int64_t size, int64_t dilation) {
  return size == 0 ? 0 : 1 + dilation * (size - 1);
}

// The padding that turns a window op's cotangent into its operand's, as jax's
// _conv_general_vjp_lhs_padding: low then high per spatial dimension.
std::pair<Ints, Ints> LhsVjpPadding(const Ints& in, const Ints& window, const Ints& strides,
                                    const Ints& out, const Ints& pad_lo, const Ints& lhs_dilation,
                                    const Ints& rhs_dilation) {
  Ints lo(in.size()), hi(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    const int64_t lhs = Dilated(in[d], lhs_dilation[d]);
    const int64_t rhs = Dilated(window[d], rhs_dilation[d]);
    lo[d] = rhs - pad_lo[d] - 1;
    hi[d] = lhs + rhs - 1 - Dilated(out[d], strides[d]) - lo[d];
  }
  return {lo, hi};
}

// The dimensions of `shape` at `dims`.
Ints Pick(const Shape& shape, const Ints& dims) {
  Ints out;
  for (int64_t d : dims) out.push_back(shape[static_cast<size_t>(d)]);
  return out;
}

// x with dimension `src` split into [groups, size / groups] (jax's _reshape_axis_out_of).
Result<Operand> SplitAxis(Backward& b, const Operand& x, size_t src, int64_t groups) {
  Shape shape = ShapeOf(b, x);
  const int64_t size = shape[src];
  shape[src] = size / groups;
  shape.insert(shape.begin() + static_cast<ptrdiff_t>(src), groups);
  return b.Emit(OpCode::kReshape, {x}, 0, Ints(shape.begin(), shape.end()));
}

// x with dimension `src` merged into dimension `dst` (numbered with src removed) as its
// major part (jax's _reshape_axis_into).
Result<Operand> MergeAxis(Backward& b, const Operand& x, size_t src, size_t dst) {
  const Shape shape = ShapeOf(b, x);
  Ints perm;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d != src) perm.push_back(static_cast<int64_t>(d));
  }
  perm.insert(perm.begin() + static_cast<ptrdiff_t>(dst), static_cast<int64_t>(src));
  ATOLL_ASSIGN_OR_RETURN(const Operand moved, b.Emit(OpCode::kTransposeNd, {x}, 0, perm));
  Shape merged;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d != src) merged.push_back(shape[d]);
  }
  merged[dst] *= shape[src];
  return b.Emit(OpCode::kReshape, {moved}, 0, Ints(merged.begin(), merged.end()));
}

// conv_general_dilated's params, read.
struct ConvParams {
  size_t n = 0;
  Ints strides, pad_lo, pad_hi, lhs_dilation, rhs_dilation, lhs_spec, rhs_spec, out_spec;
  int64_t feature_groups = 1, batch_groups = 1;

  explicit ConvParams(const ir::Op& op) : n(static_cast<size_t>(op.params[0])) {
    size_t at = 1;
    for (Ints* v : {&strides, &pad_lo, &pad_hi, &lhs_dilation, &rhs_dilation}) {
      *v = Take(op, at, n);
      at += n;
    }
    for (Ints* v : {&lhs_spec, &rhs_spec, &out_spec}) {
      *v = Take(op, at, n + 2);
      at += n + 2;
    }
    feature_groups = op.params[at];
    batch_groups = op.params[at + 1];
  }

  Ints Spatial(const Ints& spec) const { return Ints(spec.begin() + 2, spec.end()); }

  // The params of another convolution with these fields.
  static Ints Encode(size_t n, const Ints& strides, const Ints& lo, const Ints& hi,
                     const Ints& lhs_dilation, const Ints& rhs_dilation, const Ints& lhs_spec,
                     const Ints& rhs_spec, const Ints& out_spec, int64_t feature_groups,
                     int64_t batch_groups) {
    Ints p{static_cast<int64_t>(n)};
    for (const Ints* v :
         {&strides, &lo, &hi, &lhs_dilation, &rhs_dilation, &lhs_spec, &rhs_spec, &out_spec}) {
      p.insert(p.end(), v->begin(), v->end());
    }
    p.push_back(feature_groups);
    p.push_back(batch_groups);
    return p;
  }
};

// A spec with its first two entries swapped (jax's _conv_spec_transpose).
Ints SwapFirstTwo(Ints spec) {
  std::swap(spec[0], spec[1]);
  return spec;
}

Result<Operand> ConvLhsGrad(Backward& b, const OpGrad& g, const ConvParams& c, const Operand& dy) {
  Operand rhs = g.op.operands[1];
  const Shape rhs_shape = ShapeOf(b, rhs);
  if (c.feature_groups > 1) {  // the group axis goes into the transposed kernel's outputs
    const auto out_dim = static_cast<size_t>(c.rhs_spec[0]);
    ATOLL_ASSIGN_OR_RETURN(rhs, SplitAxis(b, rhs, out_dim, c.feature_groups));
    ATOLL_ASSIGN_OR_RETURN(rhs, MergeAxis(b, rhs, out_dim, static_cast<size_t>(c.rhs_spec[1])));
  }
  const auto [lo, hi] = LhsVjpPadding(Pick(ShapeOf(b, g.op.operands[0]), c.Spatial(c.lhs_spec)),
                                      Pick(rhs_shape, c.Spatial(c.rhs_spec)), c.strides,
                                      Pick(g.op.type.shape, c.Spatial(c.out_spec)), c.pad_lo,
                                      c.lhs_dilation, c.rhs_dilation);
  ATOLL_ASSIGN_OR_RETURN(const Operand flipped,
                         b.Emit(OpCode::kRev, {rhs}, 0, c.Spatial(c.rhs_spec)));
  return b.Emit(
      OpCode::kConvGeneralDilated, {dy, flipped}, -1,
      ConvParams::Encode(c.n, c.lhs_dilation, lo, hi, c.strides, c.rhs_dilation, c.out_spec,
                         SwapFirstTwo(c.rhs_spec), c.lhs_spec, c.feature_groups, 1));
}

Result<Operand> ConvRhsGrad(Backward& b, const OpGrad& g, const ConvParams& c, const Operand& dy) {
  const Operand& lhs = g.op.operands[0];
  const Ints in = Pick(ShapeOf(b, lhs), c.Spatial(c.lhs_spec));
  const Ints window = Pick(ShapeOf(b, g.op.operands[1]), c.Spatial(c.rhs_spec));
  const Ints out = Pick(g.op.type.shape, c.Spatial(c.out_spec));
  Ints hi(c.n);  // jax's _conv_general_vjp_rhs_padding
  for (size_t d = 0; d < c.n; ++d) {
    hi[d] = Dilated(out[d], c.strides[d]) - Dilated(in[d], c.lhs_dilation[d]) +
            Dilated(window[d], c.rhs_dilation[d]) - c.pad_lo[d] - 1;
  }
  return b.Emit(OpCode::kConvGeneralDilated, {lhs, dy}, -1,
                ConvParams::Encode(c.n, c.rhs_dilation, c.pad_lo, hi, c.lhs_dilation, c.strides,
                                   SwapFirstTwo(c.lhs_spec), SwapFirstTwo(c.out_spec),
                                   SwapFirstTwo(c.rhs_spec), 1, c.feature_groups));
}

}  // namespace

Result<OperandGrads> GradConv(Backward& b, const OpGrad& g) {
  const ConvParams c(g.op);
  if (c.batch_groups != 1) return NoRuleFor(g.op, "batch groups");
  OperandGrads grads(2);
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  if (g.needed[0]) {
    ATOLL_ASSIGN_OR_RETURN(grads[0], ConvLhsGrad(b, g, c, dy));
  }
  if (g.needed[1]) {
    ATOLL_ASSIGN_OR_RETURN(grads[1], ConvRhsGrad(b, g, c, dy));
  }
  return grads;
}

Result<OperandGrads> GradReduceWindowSum(Backward& b, const OpGrad& g) {
  const size_t n = ShapeOf(b, g.op.operands[0]).size();
  const Ints window = Take(g.op, 0, n), strides = Take(g.op, n, n), pad_lo = Take(g.op, 2 * n, n);
  const Ints base = Take(g.op, 4 * n, n), dilation = Take(g.op, 5 * n, n);
  const auto [lo, hi] = LhsVjpPadding(ShapeOf(b, g.op.operands[0]), window, strides,
                                      g.op.type.shape, pad_lo, base, dilation);
  // dy spread by the strides (interior padding), then summed over windows that step by the
  // base dilation.
  Ints pad = lo;
  pad.insert(pad.end(), hi.begin(), hi.end());
  for (int64_t s : strides) pad.push_back(s - 1);
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand zero, ScalarOf(b, g.op.type.dtype, 0));
  ATOLL_ASSIGN_OR_RETURN(const Operand spread, b.Emit(OpCode::kPad, {dy, zero}, 0, pad));
  Ints params = window;
  params.insert(params.end(), base.begin(), base.end());
  params.insert(params.end(), 2 * n, 0);
  params.insert(params.end(), n, 1);
  params.insert(params.end(), dilation.begin(), dilation.end());
  ATOLL_ASSIGN_OR_RETURN(const Operand back,
                         b.Emit(OpCode::kReduceWindowSum, {spread}, 0, std::move(params)));
  return OperandGrads{back};
}

Result<OperandGrads> GradReduceWindowChooser(Backward& b, const OpGrad& g) {
  const size_t n = ShapeOf(b, g.op.operands[0]).size();
  const Ints dilations = Take(g.op, 4 * n, 2 * n);
  if (std::ranges::any_of(dilations, [](int64_t d) { return d != 1; })) {
    return NoRuleFor(g.op, "a dilated window");
  }
  // Each window's cotangent goes to the element its max (min) took, as jax's
  // select_and_scatter_add with ge (le).
  Ints params = Take(g.op, 0, 4 * n);
  params.push_back(g.op.code == OpCode::kReduceWindowMax ? 0 : 1);
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand back, b.Emit(OpCode::kSelectAndScatterAdd,
                                                    {dy, g.op.operands[0]}, 0, std::move(params)));
  return OperandGrads{back};
}

Result<OperandGrads> GradDynamicSlice(Backward& b, const OpGrad& g) {
  if (!g.needed[0]) return OperandGrads(g.op.operands.size());
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand zeros, FilledLike(b, g.op.operands[0], 0));
  std::vector<Operand> operands{zeros, dy};
  operands.insert(operands.end(), g.op.operands.begin() + 1, g.op.operands.end());
  OperandGrads grads(g.op.operands.size());
  ATOLL_ASSIGN_OR_RETURN(grads[0], b.Emit(OpCode::kDynamicUpdateSlice, std::move(operands)));
  return grads;
}

Result<OperandGrads> GradDynamicUpdateSlice(Backward& b, const OpGrad& g) {
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  const std::vector<Operand> starts(g.op.operands.begin() + 2, g.op.operands.end());
  OperandGrads grads(g.op.operands.size());
  if (g.needed[0]) {  // dy with the update's window zeroed
    ATOLL_ASSIGN_OR_RETURN(const Operand zeros, FilledLike(b, g.op.operands[1], 0));
    std::vector<Operand> operands{dy, zeros};
    operands.insert(operands.end(), starts.begin(), starts.end());
    ATOLL_ASSIGN_OR_RETURN(grads[0], b.Emit(OpCode::kDynamicUpdateSlice, std::move(operands)));
  }
  if (g.needed[1]) {  // the update's window of dy
    const Shape size = ShapeOf(b, g.op.operands[1]);
    std::vector<Operand> operands{dy};
    operands.insert(operands.end(), starts.begin(), starts.end());
    ATOLL_ASSIGN_OR_RETURN(grads[1], b.Emit(OpCode::kDynamicSlice, std::move(operands), 0,
                                            Ints(size.begin(), size.end())));
  }
  return grads;
}

Result<OperandGrads> GradClamp(Backward& b, const OpGrad& g) {
  // As jax: x's where lo < x < hi, lo's where x < lo < hi, hi's where hi < x.
  const Operand& lo = g.op.operands[0];
  const Operand& x = g.op.operands[1];
  const Operand& hi = g.op.operands[2];
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand zeros, FilledLike(b, dy, 0));
  const Shape shape = ShapeOf(b, x);
  Ints all(shape.size());
  std::iota(all.begin(), all.end(), 0);
  auto masked = [&](const Operand& keep, const Operand& like) -> Result<Operand> {
    ATOLL_ASSIGN_OR_RETURN(const Operand v, b.Emit(OpCode::kSelectN, {keep, zeros, dy}));
    // A replicated [] bound takes the sum over every element it clamped.
    return ShapeOf(b, like) == shape ? v : SumOver(b, v, all);
  };
  auto spread = [&](const Operand& v) -> Result<Operand> {
    return ShapeOf(b, v) == shape ? v : BroadcastLike(b, v, x);
  };
  ATOLL_ASSIGN_OR_RETURN(const Operand lo_all, spread(lo));
  ATOLL_ASSIGN_OR_RETURN(const Operand hi_all, spread(hi));
  OperandGrads grads(3);
  if (g.needed[1]) {
    ATOLL_ASSIGN_OR_RETURN(const Operand above, b.Emit(OpCode::kGt, {x, lo_all}));
    ATOLL_ASSIGN_OR_RETURN(const Operand below, b.Emit(OpCode::kLt, {x, hi_all}));
    ATOLL_ASSIGN_OR_RETURN(const Operand inside, b.Emit(OpCode::kAnd, {above, below}));
    ATOLL_ASSIGN_OR_RETURN(grads[1], masked(inside, x));
  }
  if (g.needed[0]) {
    ATOLL_ASSIGN_OR_RETURN(const Operand over, b.Emit(OpCode::kGt, {lo_all, x}));
    ATOLL_ASSIGN_OR_RETURN(const Operand under, b.Emit(OpCode::kLt, {lo_all, hi_all}));
    ATOLL_ASSIGN_OR_RETURN(const Operand binds, b.Emit(OpCode::kAnd, {over, under}));
    ATOLL_ASSIGN_OR_RETURN(grads[0], masked(binds, lo));
  }
  if (g.needed[2]) {
    ATOLL_ASSIGN_OR_RETURN(const Operand binds, b.Emit(OpCode::kLt, {hi_all, x}));
    ATOLL_ASSIGN_OR_RETURN(grads[2], masked(binds, hi));
  }
  return grads;
}

Result<OperandGrads> GradReducePrecision(Backward& b, const OpGrad& g) {
  // Linear in jax's sense: the cotangent rounded the same way.
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_ASSIGN_OR_RETURN(const Operand back,
                         b.Emit(OpCode::kReducePrecision, {dy}, g.op.attr, g.op.params));
  return OperandGrads{back};
}

}  // namespace atl::autodiff
