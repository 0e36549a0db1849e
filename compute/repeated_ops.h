// Merging repeated ops once, when a function is compiled: a traced training step computes
// its forward pass twice (once for the outputs, once inside the gradient's trace, as
// jax.grad does), and XLA runs it once. An op that repeats an earlier one (same code,
// operands, attr, params and type, scalars compared bit for bit) is dropped and its readers
// read the earlier one. Ops that nothing reads are left alone: one that fails (an i32
// division by zero) still fails the run.
#pragma once

#include "common/ir/ir.h"

namespace atl::compute {

// `fn` with its repeated ops removed and the rest renumbered; its inputs, outputs (which now
// name the kept ops) and bodies are as they were. Ops that do more than compute their
// result are never merged: spin, structured ops (while, scan, cond) and their
// tuple_elements. A function with collectives is returned as it is (a collective's op index
// names it to the other shards). `fn` must have passed ir::Validate.
ir::FunctionDef MergeRepeatedOps(ir::FunctionDef fn);

}  // namespace atl::compute
