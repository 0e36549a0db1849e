// The vector-Jacobian product of a function of the IR, for the rules of the structured ops
// (grad_rules_control.cc), which differentiate their bodies as Grad differentiates a function.
#pragma once

#include <cstdint>
#include <vector>

#include "atoll/status.h"
#include "common/ir/ir.h"

namespace atl::autodiff {

// Grad of `f` with cotangents (atoll/grad.h): a function taking f's inputs, then one cotangent
// per output of `outputs` (float outputs, by index, in that order), that gives the gradients
// with respect to the float inputs `wrt`, in that order (zeros for one no output reaches).
// With `partial`, a gradient summed over a dimension cut over devices is left partial
// (each device its share, no all_reduce_sum: a loop body may hold none), and partial gets,
// per gradient, the mesh axes it is partial over (a bit each; 0: whole).
Result<ir::FunctionDef> Vjp(const ir::FunctionDef& f, const std::vector<int>& wrt,
                            const std::vector<int>& outputs,
                            std::vector<uint32_t>* partial = nullptr);

}  // namespace atl::autodiff
