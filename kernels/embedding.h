// Embedding lookup and its gradient. Pure; never throw. Thread-safe.
#pragma once

#include <cstdint>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::kernels {

// Rows of `table` f32 or f64 [v,d] picked by `ids` i32 or i64 of any shape s: out is s + [d]
// of the table's dtype, out[i] = table[ids[i]]. InvalidArgument for an id outside [0, v),
// naming its position.
Result<Tensor> EmbeddingGather(const Tensor& table, const Tensor& ids);

// The gradient of EmbeddingGather with respect to the table: `dout` f32 or f64 s + [d]
// scatter-added into a zero [vocab_size, d] of its dtype by `ids` i32 or i64 s (repeated ids
// accumulate).
Result<Tensor> EmbeddingGrad(const Tensor& dout, const Tensor& ids, int64_t vocab_size);

}  // namespace atl::kernels
