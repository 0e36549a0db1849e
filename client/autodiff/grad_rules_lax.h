// The gradient rules of the jax.lax primitives (common/ir/grad_rules.def's last rows), as
// jax differentiates them: each gives the cotangents of an op's float operands from its
// result's, built from primitives of the IR (so a rule's ops shard as those primitives do,
// and a cut the backward ops cannot take is refused by their type rules, naming them).
#pragma once

#include "client/autodiff/backward.h"

namespace atl::autodiff {

// The binary family (max, min, pow, atan2, rem; the others give integers or booleans, or
// are flat: no cotangent) and the unary family (sin, cos, ..., erf_inv; lgamma refused).
Result<OperandGrads> GradLaxBinary(Backward& b, const OpGrad& g);
Result<OperandGrads> GradLaxUnary(Backward& b, const OpGrad& g);
Result<OperandGrads> GradSelectN(Backward& b, const OpGrad& g);
Result<OperandGrads> GradConvertElementType(Backward& b, const OpGrad& g);
Result<OperandGrads> GradReshape(Backward& b, const OpGrad& g);
Result<OperandGrads> GradBroadcastInDim(Backward& b, const OpGrad& g);
Result<OperandGrads> GradTransposeNd(Backward& b, const OpGrad& g);
Result<OperandGrads> GradSlice(Backward& b, const OpGrad& g);
Result<OperandGrads> GradConcatenate(Backward& b, const OpGrad& g);
Result<OperandGrads> GradPad(Backward& b, const OpGrad& g);
Result<OperandGrads> GradRev(Backward& b, const OpGrad& g);
Result<OperandGrads> GradReduceChooser(Backward& b, const OpGrad& g);  // reduce_max, min
Result<OperandGrads> GradDotGeneral(Backward& b, const OpGrad& g);
Result<OperandGrads> GradIntegerPow(Backward& b, const OpGrad& g);
Result<OperandGrads> GradCumsum(Backward& b, const OpGrad& g);

// grad_rules_window.cc: convolution, window reductions, dynamic slices, clamp,
// reduce_precision.
Result<OperandGrads> GradConv(Backward& b, const OpGrad& g);
Result<OperandGrads> GradReduceWindowSum(Backward& b, const OpGrad& g);
Result<OperandGrads> GradReduceWindowChooser(Backward& b, const OpGrad& g);  // max, min
Result<OperandGrads> GradDynamicSlice(Backward& b, const OpGrad& g);
Result<OperandGrads> GradDynamicUpdateSlice(Backward& b, const OpGrad& g);
Result<OperandGrads> GradClamp(Backward& b, const OpGrad& g);
Result<OperandGrads> GradReducePrecision(Backward& b, const OpGrad& g);

// grad_rules_scatter.cc: gather and the scatter family.
Result<OperandGrads> GradGather(Backward& b, const OpGrad& g);
Result<OperandGrads> GradScatter(Backward& b, const OpGrad& g);
Result<OperandGrads> GradScatterAdd(Backward& b, const OpGrad& g);
Result<OperandGrads> GradScatterMul(Backward& b, const OpGrad& g);
Result<OperandGrads> GradScatterChooser(Backward& b, const OpGrad& g);  // scatter_min, max

// grad_rules_order.cc: reduce_prod, the running reductions but cumsum, sort.
Result<OperandGrads> GradReduceProd(Backward& b, const OpGrad& g);
Result<OperandGrads> GradCumprod(Backward& b, const OpGrad& g);
Result<OperandGrads> GradCumulativeChooser(Backward& b, const OpGrad& g);  // cummax, cummin
Result<OperandGrads> GradSort(Backward& b, const OpGrad& g);

// grad_rules_control.cc: scan and cond (their bodies' VJPs in a scan or cond of their own),
// and tuple_element, which hands its cotangent to the structured op whose result it reads.
Result<OperandGrads> GradScan(Backward& b, const OpGrad& g);
Result<OperandGrads> GradCond(Backward& b, const OpGrad& g);
Result<OperandGrads> GradTupleElement(Backward& b, const OpGrad& g);

}  // namespace atl::autodiff
