// The cpu backend: runs each op with the host kernels of the kernel library (kernels/),
// looked up in the op table (cpu_ops.h).
#pragma once

#include "compute/backend.h"

namespace atl::compute {

// Stateless, so thread-safe: any number of threads may call Run at once.
class CpuBackend final : public Backend {
 public:
  // A process-wide instance, the interpreter's default backend.
  static CpuBackend& Get();

  std::string_view name() const override { return "cpu"; }
  // Every op of the table but the collectives (RunCpuOp says what is refused);
  // Internal when `operands` does not have one entry per op.operands.
  Result<Tensor> Run(const ir::Op& op, std::span<const Tensor* const> operands) override;
};

}  // namespace atl::compute
