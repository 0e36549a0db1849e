// The local math of the collectives: given every shard's tensor (one per device, in shard
// order), what each shard holds afterwards. The runtime's transport moves the bytes; these
// functions only compute. Every dtype: f32 and f64 sum in their precision, bf16 and f16 in
// f32 and round once, i32 and i64 wrap around on overflow (two's complement).
// Every result is computed in one fixed order (shard 0 first), so all shards of an
// all-reduce get bit-identical values. Pure; never throw. Thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::kernels {

// Every shard gets the elementwise sum of all shards (one dtype and shape).
Result<std::vector<Tensor>> AllReduceSum(std::span<const Tensor> shards);

// Every shard gets the shards concatenated along `axis` (equal in every other dimension).
Result<std::vector<Tensor>> AllGather(std::span<const Tensor> shards, int64_t axis);

// The elementwise sum of all shards (one dtype and shape), cut into as many equal pieces
// along `axis` as there are shards: shard i gets piece i. The axis' size must be a multiple
// of the shard count.
Result<std::vector<Tensor>> ReduceScatter(std::span<const Tensor> shards, int64_t axis);

// Each shard i cuts its tensor into n equal pieces along `split_axis` (n = shard count) and
// sends piece j to shard j; shard j concatenates the pieces it receives, in shard order,
// along `concat_axis`. All shards of one dtype and shape. With split_axis == concat_axis the
// shapes are unchanged.
Result<std::vector<Tensor>> AllToAll(std::span<const Tensor> shards, int64_t split_axis,
                                     int64_t concat_axis);

}  // namespace atl::kernels
