// The cpu backend's ops that the kernel library (kernels/) computes: matmul, unary ops,
// GELU, bias add, reductions, softmax, layer norm, cross-entropy, transpose, SGD and Adam,
// the routed-expert ops (grouped matmul, row scatter-add and gather) and the gating ops
// (top-k, column), each on one shard's local tensors (ir.h's OpCode says which shardings
// make that right).
#pragma once

#include <span>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/ir/ir.h"

namespace atl::executor {

// True for the op codes RunModelOp computes.
bool IsModelOp(ir::OpCode code);

// Computes `op` on this shard's `operands` (one per op.operands; nullptr for a scalar, which
// only Adam's hyper-parameters may be).
// InvalidArgument when the operands do not fit the op.
Result<Tensor> RunModelOp(const ir::Op& op, std::span<const Tensor* const> operands);

}  // namespace atl::executor
