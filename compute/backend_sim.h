// The sim backend: a device whose time is modelled, not burnt. A `spin` op occupies the
// device's stream for its time by sleeping, so that many simulated devices share a 2-core
// machine without competing for it; figures measured on sim devices are the runtime's
// overhead, not arithmetic. Every other op is computed by the cpu kernels, which are cheap
// at the sizes sim devices are used for.
#pragma once

#include "compute/backend.h"

namespace atl::compute {

class SimBackend final : public Backend {
 public:
  static SimBackend& Get();  // stateless; safe from any thread

  std::string_view name() const override { return "sim"; }
  Result<Tensor> Run(const ir::Op& op, std::span<const Tensor* const> operands) override;
};

// The backend for a device kind ("cpu" or "sim"); NotFound for any other.
Result<Backend*> BackendForKind(std::string_view kind);

}  // namespace atl::compute
