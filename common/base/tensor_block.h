// Rectangular blocks of a row-major tensor: cutting one out and writing one in. What
// sharding a tensor, assembling shards and resharding between layouts are made of.
#pragma once

#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl {

// A copy of the block of `src` that starts at `begin` and has shape `size`.
// InvalidArgument when the block does not lie inside `src`.
Result<Tensor> ExtractBlock(const Tensor& src, const Shape& begin, const Shape& size);

// Writes `block` into `dst` with its first element at `begin`. InvalidArgument when the
// dtypes differ or the block does not fit there.
Status InsertBlock(Tensor& dst, const Tensor& block, const Shape& begin);

// `parts` joined along `dim`, in order: they may differ in length there and nowhere else.
Result<Tensor> Concat(const std::vector<Tensor>& parts, size_t dim);

// The rows (slices along dimension 0) of `values` whose entry in the i32 `destinations`
// is `destination`, in order.
Result<Tensor> SelectRows(const Tensor& values, const Tensor& destinations, int32_t destination);

}  // namespace atl
