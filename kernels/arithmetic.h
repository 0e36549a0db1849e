// Elementwise arithmetic over f32, f64, i32 and i64 tensors of one shape, or a tensor and a scalar:
// the IR's add, sub, mul and div (and max, min). Pure functions from host tensors to a new
// host tensor. None of them throws or aborts; a tensor of the wrong shape or dtype, a
// malformed tensor (byte count not matching dtype and shape), an unknown dtype or an unknown
// BinaryFn gives InvalidArgument naming what was expected and what came. Thread-safe: no
// shared state. (BroadcastBinary, elementwise.h, is the float one with numpy broadcasting.)
#pragma once

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "kernels/elementwise.h"

namespace atl::kernels {

// Elementwise `lhs fn rhs` over two tensors of the same dtype and shape (f32, f64, i32 or
// i64; bf16 and f16 are refused, their callers compute in f32). f32 and f64 follow IEEE 754
// (x / 0 is +-inf or nan; max and min give NaN for a NaN on either side). i32 and i64 add,
// sub and mul wrap around on overflow (two's complement); div truncates toward zero, MIN / -1
// wraps to MIN, and any zero divisor makes the whole call InvalidArgument.
Result<Tensor> Binary(BinaryFn fn, const Tensor& lhs, const Tensor& rhs);

// `tensor fn scalar` and `scalar fn tensor`: the scalar is first converted to the
// tensor's dtype. For i32 and i64 it must be a whole number within the dtype's range (else
// InvalidArgument); for f32 it is rounded to the nearest float. Same arithmetic as above.
Result<Tensor> Binary(BinaryFn fn, const Tensor& lhs, double rhs);
Result<Tensor> Binary(BinaryFn fn, double lhs, const Tensor& rhs);

}  // namespace atl::kernels
