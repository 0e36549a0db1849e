#include "compute/backend_cpu.h"

#include <fmt/format.h>

#include "compute/cpu_ops.h"

namespace atl::compute {

CpuBackend& CpuBackend::Get() {
  static CpuBackend backend;
  return backend;
}

Result<Tensor> CpuBackend::Run(const ir::Op& op, std::span<const Tensor* const> operands) {
  if (operands.size() != op.operands.size()) {
    return Internal(fmt::format("{}: {} operand tensors for {} operands", ir::OpName(op.code),
                                operands.size(), op.operands.size()));
  }
  return RunCpuOp(op, operands);
}

}  // namespace atl::compute
