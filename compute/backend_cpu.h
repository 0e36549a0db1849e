// The cpu backend: runs each op with the host kernels of kernels.h.
#pragma once

#include "compute/backend.h"

namespace atl::executor {

// Stateless, so thread-safe: any number of threads may call Run at once.
class CpuBackend final : public Backend {
 public:
  // A process-wide instance, the interpreter's default backend.
  static CpuBackend& Get();

  std::string_view name() const override { return "cpu"; }
  // add/sub/mul/div: two operands, at most one of them a scalar. matmul: two tensors.
  // spin: one tensor, busy for op.attr microseconds. Anything else is InvalidArgument.
  Result<Tensor> Run(const ir::Op& op, std::span<const Tensor* const> operands) override;
};

}  // namespace atl::executor
