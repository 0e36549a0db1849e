// Runs a compiled function's straight-line op list on one shard of a gang.
#pragma once

#include <atomic>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/ir/ir.h"
#include "compute/backend.h"
#include "compute/backend_cpu.h"

namespace atl::compute {

// Runs `fn` as shard `shard` of `num_shards` on `backend`. `inputs[i]` is this shard's local
// piece of fn.inputs[i]: its dtype must be fn.inputs[i].dtype and its shape
// ir::ShardShape(fn.inputs[i], ir::MeshOf(fn, num_shards)). Every op acts on local pieces only
// (elementwise ops shard by shard; matmul of a row-split left operand by a replicated right one is
// the local matmul), so no shard talks to another.
//
// Returns this shard's pieces of fn.outputs, in order. Errors, all InvalidArgument:
// a wrong input count, dtype or shape (the message names the input, the expected and the
// actual shape); shard outside [0, num_shards); an op the backend rejects (i32 division by
// zero, ...), with the op's index and name as context; an op whose result does not have
// the local shape its declared type gives. `fn` should have passed
// ir::Validate(fn, num_shards); a function that did not still never makes RunFunction read
// out of range: a bad operand reference is InvalidArgument.
//
// Runs on the calling thread and blocks as long as the ops take (spin ops included).
// Collective ops go to `collectives`; a function with collectives fails with
// FailedPrecondition when it is null. Once `cancelled` (optional) is set, the function
// stops before its next op, or inside a spin (compute/cancellation.h), with Cancelled.
Result<std::vector<Tensor>> RunFunction(const ir::FunctionDef& fn, int shard, int num_shards,
                                        std::vector<Tensor> inputs,
                                        Backend& backend = CpuBackend::Get(),
                                        Collectives* collectives = nullptr,
                                        const std::atomic<bool>* cancelled = nullptr);

}  // namespace atl::compute
