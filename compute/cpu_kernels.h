// The cpu backend's kernels, one per row of the op table (common/ir/ops.def's CpuKernel
// column), declared from the table itself so that a new row's kernel needs no declaration
// here (a kernel that several rows share is declared once per row, which C++ allows). Each
// unpacks the op's params and attr as its row lays them out and runs the kernel library
// (kernels/) on one shard's local tensors. Operands of bf16 and f16 come widened to f32
// (RunCpuOp); a result of a storage dtype is rounded into it once by the kernel or there.
// They are defined in cpu_ops.cc (the runtime's own rows), cpu_lax_ops.cc (the jax.lax
// primitives) and the primitive families of ops/ (ops/op_parts.h). Stateless; thread-safe.
#pragma once

#include <span>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/ir/ir.h"

namespace atl::compute {

using CpuOperands = std::span<const Tensor* const>;

#define ATOLL_OP(Name, name, operands, TypeRule, CpuKernel, GradRule) \
  Result<Tensor> CpuKernel(const ir::Op&, CpuOperands);
#include "common/ir/ops.def"

// What the jax.lax kernels share (cpu_lax_ops.cc). Every operand as a tensor (the rules made
// them so; a corrupt op is refused here).
Result<std::vector<const Tensor*>> AllTensors(const ir::Op& op, CpuOperands operands);
// The kernel's result in the dtype the op's rule gave it: a storage dtype computed in f32 is
// rounded into it once.
Result<Tensor> InOpDType(const ir::Op& op, Result<Tensor> result);

}  // namespace atl::compute
