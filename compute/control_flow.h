// The structured ops (while, scan, cond: ops.def) as the interpreter runs them: each runs
// bodies of its function on this shard's tensors, through the interpreter again.
#pragma once

#include <atomic>
#include <functional>
#include <span>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/ir/ir.h"

namespace atl::compute {

// Runs `body` (a function of the running one's bodies) on this shard's `inputs`.
using BodyRunner =
    std::function<Result<std::vector<Tensor>>(const ir::FunctionDef& body, std::vector<Tensor>)>;

// Every result of the structured op `op` of `fn` (ir::IsStructured), on this shard's `args`
// (one tensor per operand) over `mesh`. A while loop checks `cancelled` (optional) before
// each trip and stops with Cancelled once it is set. InvalidArgument for an index or a count
// the op's rule would have refused.
Result<std::vector<Tensor>> RunStructured(const ir::FunctionDef& fn, const ir::Op& op,
                                          std::span<const Tensor* const> args, const Shape& mesh,
                                          const BodyRunner& run_body,
                                          const std::atomic<bool>* cancelled);

}  // namespace atl::compute
