// Fusion of elementwise chains: consecutive f32 ops of the runtime's arithmetic rows (add, sub,
// mul, div) and unary rows (exp, tanh, neg, ...) whose intermediate values nothing else reads
// run as one kernels::EvalFused pass, block by block in cache, instead of one pass over memory
// and one buffer per op. A broadcast_in_dim in the chain (layer norm's mean, softmax's sum,
// a bias) is read through strides in place rather than made at the result's size. The
// result is bit for bit the unfused one: EvalFused applies the same loops. Only the cpu
// backend fuses (a backend that models each op's time must see them).
#pragma once

#include <span>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/ir/ir.h"

namespace atl::compute {

// Per op of `fn`: the index of the last op of the fused group that op i starts (> i), or i
// where op i runs on its own. `last_use[j]` is the last op reading op j's result
// (fn.ops.size() for an output of fn or a value nothing reads).
std::vector<size_t> FusedGroups(const ir::FunctionDef& fn, const std::vector<size_t>& last_use);

// The operands from outside the group [first, last] that it reads (function inputs and
// results of earlier ops, each once), in the order RunFusedGroup takes their tensors.
std::vector<ir::Operand> FusedGroupInputs(const ir::FunctionDef& fn, size_t first, size_t last);

// Runs ops [first, last] of `fn` as one pass and returns op last's result. `outside` is what
// FusedGroupInputs gave for the group, `inputs` their local tensors, in that order.
Result<Tensor> RunFusedGroup(const ir::FunctionDef& fn, size_t first, size_t last,
                             std::span<const ir::Operand> outside,
                             std::span<const Tensor* const> inputs);

}  // namespace atl::compute
