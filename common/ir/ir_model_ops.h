// Type inference for the ops of the kernel library (OpCode kMatmul and kExp onwards, see
// ir.h): their shapes, dtypes, and the shardings under which each shard's local result is
// its block of the global one. Internal to ir.cc.
#pragma once

#include "atoll/status.h"
#include "common/ir/ir.h"

namespace atl::ir::internal {

Result<TensorType> InferMatmul(const FunctionDef& fn, const Op& op);
// Every op code from kExp on; InvalidArgument for any other.
Result<TensorType> InferModelOp(const FunctionDef& fn, const Op& op);

}  // namespace atl::ir::internal
