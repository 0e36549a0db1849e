// The cpu backend's kernels, one per row of the op table (common/ir/ops.def's CpuKernel
// column): each computes its op on one shard's local tensors with the kernel library
// (kernels/), on the shardings its type rule accepts (ops.def says which make that right).
// bf16 and f16 operands are widened to f32 for the kernel and its result rounded once into
// the op's storage dtype: the kernels compute in f32 and f64 only. Stateless; thread-safe.
#pragma once

#include <span>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/ir/ir.h"
#include "kernels/elementwise.h"

namespace atl::compute {

// Computes `op` on this shard's `operands`, one per op.operands: the local tensor, or nullptr
// where that operand is a scalar (its value is op.operands[i].scalar); the tensors are
// borrowed for the call only. Returns the op's local result. InvalidArgument for an op code
// outside the table, an operand count other than the op's row gives, a scalar where the op
// needs a tensor, or operands the kernel refuses (naming the op). The collectives
// (ir::IsCollective) are run by the interpreter: InvalidArgument here.
Result<Tensor> RunCpuOp(const ir::Op& op, std::span<const Tensor* const> operands);

// The kernel functions of the runtime's arithmetic rows (add, sub, mul, div) and of its
// unary rows (the same row of atoll/unary_ops.def); InvalidArgument for any other code.
Result<kernels::BinaryFn> BinaryFnOf(ir::OpCode code);
Result<kernels::UnaryFn> UnaryFnOf(ir::OpCode code);

}  // namespace atl::compute
