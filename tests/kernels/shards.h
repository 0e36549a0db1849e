// Cutting global tensors into the blocks of a 1-D mesh and putting them back, for tests
// that run a function shard by shard.
#pragma once

#include <cstring>
#include <vector>

#include "atoll/tensor.h"
#include "common/ir/ir.h"

namespace atl::testutil {

// A tensor type cut along `split_dim` over mesh axis 0 (-1: replicated).
inline ir::TensorType Type(DType dtype, Shape shape, int32_t split_dim = -1) {
  return ir::SplitType(dtype, std::move(shape), split_dim);
}
inline ir::Operand Input(int32_t i) { return {ir::Operand::kInput, i, 0.0}; }

// The dimension a 1-D mesh cuts, or -1.
inline int32_t SplitDim(const ir::TensorType& type) {
  for (size_t d = 0; d < type.split.size(); ++d) {
    if (type.split[d] >= 0) return static_cast<int32_t>(d);
  }
  return -1;
}
// Block `shard` of `num_shards` along `dim` of a row-major tensor.
inline Tensor ShardOf(const Tensor& global, int32_t dim, int shard, int num_shards) {
  if (dim < 0) return global;
  const Shape& g = global.shape();
  Shape local = g;
  local[dim] /= num_shards;
  int64_t outer = 1;
  int64_t inner = 1;
  for (int32_t d = 0; d < dim; ++d) outer *= g[d];
  for (size_t d = dim + 1; d < g.size(); ++d) inner *= g[d];
  Tensor out(global.dtype(), local);
  const size_t elem = DTypeSize(global.dtype());
  const size_t run = static_cast<size_t>(local[dim] * inner) * elem;
  for (int64_t o = 0; o < outer; ++o) {
    const int64_t from = (o * g[dim] + shard * local[dim]) * inner;
    std::memcpy(out.data() + o * run, global.data() + from * elem, run);
  }
  return out;
}

// The inverse of ShardOf: puts shards back together along `dim`.
inline Tensor Assemble(const std::vector<Tensor>& shards, int32_t dim, const Shape& global_shape) {
  Tensor out(shards.at(0).dtype(), global_shape);
  const int n = static_cast<int>(shards.size());
  const Shape& local = shards[0].shape();
  int64_t outer = 1;
  int64_t inner = 1;
  for (int32_t d = 0; d < dim; ++d) outer *= global_shape[d];
  for (size_t d = dim + 1; d < global_shape.size(); ++d) inner *= global_shape[d];
  const size_t elem = DTypeSize(out.dtype());
  const size_t run = static_cast<size_t>(local[dim] * inner) * elem;
  for (int s = 0; s < n; ++s) {
    for (int64_t o = 0; o < outer; ++o) {
      const int64_t to = (o * global_shape[dim] + s * local[dim]) * inner;
      std::memcpy(out.data() + to * elem, shards[s].data() + o * run, run);
    }
  }
  return out;
}

}  // namespace atl::testutil
