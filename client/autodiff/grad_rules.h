// The gradient table's rows as Grad uses them (common/ir/grad_rules.def): each op's rule, or
// why it is not differentiable.
#pragma once

#include <string_view>

#include "client/autodiff/backward.h"
#include "common/ir/ir.h"

namespace atl::autodiff {

struct GradRow {
  ir::OpCode code;
  GradRule rule;                        // nullptr: not differentiable
  std::string_view not_differentiable;  // why, when rule is nullptr
};

// The row of `code`, which must be an op code of the table (ir::kNumOpCodes).
const GradRow& GradRowOf(ir::OpCode code);

}  // namespace atl::autodiff
