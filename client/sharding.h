// Cutting a global tensor into the shards of a 1-D sharding and putting it back together.
#pragma once

#include <vector>

#include "atoll/tensor.h"

namespace atl {

// Shard `index` of `parts` equal blocks along `dim` (dim < 0: the whole tensor).
Result<Tensor> ShardOf(const Tensor& t, int dim, int parts, int index);
// The inverse: concatenates shards along `dim` (of equal lengths there, or of any lengths
// for a dynamic dimension; every other dimension must agree). For dim < 0 (replicated) every
// shard must hold the same value; Internal when they differ.
Result<Tensor> Assemble(const std::vector<Tensor>& shards, int dim);

}  // namespace atl
