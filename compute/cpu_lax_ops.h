// The cpu backend's kernels of the jax.lax primitives (common/ir/ops.def's last rows), each
// the row's CpuKernel: the op's params and attr unpacked as its row lays them out, and the
// kernel of kernels/lax.h run on the shard's local tensors. Operands of bf16 and f16 come
// widened to f32 (RunCpuOp); a result of a storage dtype is rounded into it once here or
// there. Stateless; thread-safe.
#pragma once

#include <span>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/ir/ir.h"

namespace atl::compute {

using CpuOperands = std::span<const Tensor* const>;

Result<Tensor> RunLaxBinary(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunLaxUnary(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunSelectN(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunClamp(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunConvertElementType(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunReshape(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunBroadcastInDim(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunTransposeNd(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunSlice(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunConcatenate(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunPad(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunRev(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunIota(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunReduceAxes(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunArgReduce(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunDotGeneral(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunIntegerPow(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunCumulative(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunDynamicSlice(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunDynamicUpdateSlice(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunBitcastConvertType(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunGather(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunScatter(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunSort(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunFull(const ir::Op& op, CpuOperands operands);
// The windowed primitives.
Result<Tensor> RunReduceWindow(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunSelectAndScatterAdd(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunConv(const ir::Op& op, CpuOperands operands);
Result<Tensor> RunReducePrecision(const ir::Op& op, CpuOperands operands);

}  // namespace atl::compute
