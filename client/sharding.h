// Cutting a global tensor into the shards of its sharding over a mesh, and putting them
// back together.
#pragma once

#include <vector>

#include "atoll/tensor.h"
#include "common/ir/ir.h"

namespace atl {

// Shard `shard` of `t` laid out as `type` over `mesh`.
Result<Tensor> ShardOf(const Tensor& t, const ir::TensorType& type, const Shape& mesh, int shard);

// The inverse: the global tensor from one shard per device of `mesh`. Replicas must hold the
// same value (Internal when they differ). A dynamic dimension (cut over a 1-D mesh) joins
// shards of any lengths in order.
Result<Tensor> Assemble(const std::vector<Tensor>& shards, const ir::TensorType& type,
                        const Shape& mesh);

}  // namespace atl
