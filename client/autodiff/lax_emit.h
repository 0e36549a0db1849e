// Small builders the jax.lax gradient rules share (grad_rules_*.cc, ops/*.cc):
// each appends one op or a short run of ops to the function being differentiated.
#pragma once

#include <string_view>
#include <vector>

#include "client/autodiff/backward.h"

namespace atl::autodiff {

// The cotangent of g's result as a value (a constant one is materialized).
Result<ir::Operand> LaxDy(Backward& b, const OpGrad& g);
// InvalidArgument naming the op: no rule covers this case, because `why`.
Status NoRuleFor(const ir::Op& op, std::string_view why);
// A replicated [] of `dtype` holding `value`.
Result<ir::Operand> ScalarOf(Backward& b, DType dtype, double value);
// x's type filled with `value`.
Result<ir::Operand> FilledLike(Backward& b, const ir::Operand& x, double value);
Result<ir::Operand> Times(Backward& b, const ir::Operand& x, const ir::Operand& y);
Result<ir::Operand> Over(Backward& b, const ir::Operand& x, const ir::Operand& y);
Result<ir::Operand> Plus(Backward& b, const ir::Operand& x, const ir::Operand& y);
Shape ShapeOf(Backward& b, const ir::Operand& v);
// v summed over `dims` of its type (any order), one reduce_sum each, the highest first.
Result<ir::Operand> SumOver(Backward& b, ir::Operand v, std::vector<int64_t> dims);
// `v` (of the `kept` dimensions of `shape`) broadcast back over `shape`.
Result<ir::Operand> BroadcastBack(Backward& b, const ir::Operand& v, const Shape& shape,
                                  const std::vector<int64_t>& kept);

// A replicated [] `v` broadcast to `like`'s type, cut as `like` is.
Result<ir::Operand> BroadcastLike(Backward& b, const ir::Operand& v, const ir::Operand& like);
// The positions along `dim` of `shape`: an i32 iota.
Result<ir::Operand> IotaOf(Backward& b, const Shape& shape, size_t dim);
// NoRuleFor op where one of `dims` of its operand 0 is cut over devices (a rule that runs
// along those dimensions needs them whole).
Status NotCut(Backward& b, const ir::Op& op, const std::vector<int64_t>& dims);

}  // namespace atl::autodiff
