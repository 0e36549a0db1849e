// The vector-Jacobian product of a function of the IR, for the rules of the structured ops
// (grad_rules_control.cc), which differentiate their bodies as Grad differentiates a function.
#pragma once

#include <vector>

#include "atoll/status.h"
#include "common/ir/ir.h"

namespace atl::autodiff {

// Grad of `f` with cotangents (atoll/grad.h): a function taking f's inputs, then one cotangent
// per output of `outputs` (float outputs, by index, in that order), that gives the gradients
// with respect to the float inputs `wrt`, in that order (zeros for one no output reaches).
Result<ir::FunctionDef> Vjp(const ir::FunctionDef& f, const std::vector<int>& wrt,
                            const std::vector<int>& outputs);

}  // namespace atl::autodiff
