// Cast: a tensor's values in another dtype (the IR's cast op). Pure; never throws;
// thread-safe.
#pragma once

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::kernels {

// `x` (any dtype) as dtype `to`, of the same shape.
// - Into f32, f64, bf16 or f16 a value rounds to nearest, ties to even, once: an f64 or an
//   integer goes straight to bf16 or f16, never through a rounding to f32. f32 to and from
//   bf16 and f16 run kernels/half_convert.h's vector loops.
// - Into i32 or i64 a floating value is truncated toward zero; one that is NaN, infinite or
//   out of the dtype's range after truncation, and an i64 out of i32's range, is
//   InvalidArgument naming its position: there is no right value to give it.
// - Into its own dtype: a copy.
// InvalidArgument for a malformed `x` or an unknown `to`.
Result<Tensor> Cast(const Tensor& x, DType to);

}  // namespace atl::kernels
