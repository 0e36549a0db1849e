#include "compute/backend_sim.h"

#include <algorithm>
#include <thread>

#include "compute/backend_cpu.h"
#include "compute/cancellation.h"
#include "kernels/spin.h"

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
  // Asleep in slices of kSpinCancelCheckMicros, so that a cancelled shard stops as soon on
  // a sim device as on a cpu one.
  using Clock = std::chrono::steady_clock;
  auto micros = [](double us) {
    return std::chrono::ceil<Clock::duration>(std::chrono::duration<double, std::micro>(us));
  };
  const auto deadline = Clock::now() + micros(op.attr);
  const std::atomic<bool>* cancelled = CurrentCancelFlag();
  for (auto now = Clock::now(); now < deadline; now = Clock::now()) {
    if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) {
      return Cancelled("spin cancelled on a sim device");
    }
    std::this_thread::sleep_until(
        std::min(deadline, now + micros(kernels::kSpinCancelCheckMicros)));
  }
  return *operands[0];
}

Result<Backend*> BackendForKind(std::string_view kind) {
  if (kind == "cpu") return static_cast<Backend*>(&CpuBackend::Get());
  if (kind == "sim") return static_cast<Backend*>(&SimBackend::Get());
  return NotFound("no backend for device kind '" + std::string(kind) + "'");
}

}  // namespace atl::compute
