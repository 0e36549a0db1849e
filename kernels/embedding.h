// Embedding lookup and its gradient. Pure; never throw. Thread-safe.
#pragma once

#include <cstdint>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::kernels {

// Rows of `table` f32 [v,d] picked by `ids` i32 of any shape s: out is f32 s + [d], out[i] =
// table[ids[i]]. InvalidArgument for an id outside [0, v), naming its position.
Result<Tensor> EmbeddingGather(const Tensor& table, const Tensor& ids);

// The gradient of EmbeddingGather with respect to the table: `dout` f32 s + [d] scatter-added
// into a zero f32 [vocab_size, d] by `ids` i32 s (repeated ids accumulate).
Result<Tensor> EmbeddingGrad(const Tensor& dout, const Tensor& ids, int64_t vocab_size);

}  // namespace atl::kernels
