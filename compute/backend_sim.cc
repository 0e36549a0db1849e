#include "compute/backend_sim.h"

#include <thread>

#include "compute/backend_cpu.h"

namespace atl::compute {

SimBackend& SimBackend::Get() {
  static SimBackend backend;
  return backend;
}

Result<Tensor> SimBackend::Run(const ir::Op& op, std::span<const Tensor* const> operands) {
  if (op.code != ir::OpCode::kSpin) return CpuBackend::Get().Run(op, operands);
  if (operands.size() != 1 || operands[0] == nullptr) {
    return InvalidArgument("spin takes one tensor operand");
  }
  if (op.attr < 0) return InvalidArgument("spin time must be >= 0 us");
  std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(op.attr));
  return *operands[0];
}

Result<Backend*> BackendForKind(std::string_view kind) {
  if (kind == "cpu") return static_cast<Backend*>(&CpuBackend::Get());
  if (kind == "sim") return static_cast<Backend*>(&SimBackend::Get());
  return NotFound("no backend for device kind '" + std::string(kind) + "'");
}

}  // namespace atl::compute
