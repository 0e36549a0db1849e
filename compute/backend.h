// The seam between the interpreter and whatever computes an op on a device. The cpu backend
// (backend_cpu.h) runs real kernels; a simulated backend can replace it (for instance one
// that only models time), and tests inject fakes through the same interface.
#pragma once

#include <span>
#include <string_view>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/ir/ir.h"

namespace atl::compute {

// How a shard meets the other shards of its gang for collective ops. The executor gives
// each running shard one, bound to its gang.
class Collectives {
 public:
  virtual ~Collectives() = default;
  // Contributes this shard's `local` block to collective op `op_index` of the running
  // function (an ir::IsCollective op, whose row in ops.def says what it computes) and blocks
  // until this shard's block of the result is known, from the shards of its group.
  virtual Result<Tensor> Run(uint32_t op_index, Tensor local) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // A short name for logs and error messages: "cpu", "sim".
  virtual std::string_view name() const = 0;

  // Computes one op on one shard. `operands` has one entry per op.operands[i]: this shard's
  // local tensor, or nullptr where that operand is a scalar (its value is
  // op.operands[i].scalar). The pointed-to tensors are borrowed for the call only.
  // Returns the op's local result, or InvalidArgument when the operands do not fit the op.
  // Whether Run may be called from several threads at once is up to each implementation.
  virtual Result<Tensor> Run(const ir::Op& op, std::span<const Tensor* const> operands) = 0;
};

}  // namespace atl::compute
