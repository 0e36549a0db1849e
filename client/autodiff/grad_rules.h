// The gradient rules of the op table (common/ir/ops.def's GradRule column), declared from the
// table itself so that a new row's rule needs no declaration here (a rule that several rows
// share is declared once per row, which C++ allows), and the rows as Grad uses them: each
// op's rule, or why it is not differentiable. The rules are defined in grad_rules*.cc and
// the primitive families of ops/ (ops/op_parts.h); the jax.lax primitives' ones as jax
// differentiates them, built from primitives of the IR (so a rule's ops shard as those
// primitives do, and a cut the backward ops cannot take is refused by their type rules,
// naming them).
#pragma once

#include <string_view>

#include "client/autodiff/backward.h"
#include "common/ir/ir.h"

namespace atl::autodiff {

// A row without a rule (ATOLL_NO_GRAD) declares this name instead, which nothing defines or
// uses: the declaration is only there because the macro must expand to something declarable.
#define ATOLL_OP(Name, name, operands, TypeRule, CpuKernel, GradRule) \
  Result<OperandGrads> GradRule(Backward& b, const OpGrad& g);
#define ATOLL_NO_GRAD(why) NotDifferentiable
#include "common/ir/ops.def"

struct GradRow {
  ir::OpCode code;
  GradRule rule;                        // nullptr: not differentiable
  std::string_view not_differentiable;  // why, when rule is nullptr
};

// The row of `code`, which must be an op code of the table (ir::kNumOpCodes).
const GradRow& GradRowOf(ir::OpCode code);

}  // namespace atl::autodiff
