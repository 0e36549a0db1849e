// The executor's own cpu kernels, for what the kernel library (kernels/) does not cover:
// binary ops on f32 and i32 with scalars, filter and spin. Pure functions from host tensors
// to a new host tensor. None of them throws or aborts; a tensor of the wrong shape or dtype, a
// malformed tensor (byte count not matching dtype and shape) or an unknown dtype gives
// InvalidArgument naming what was expected and what came. Thread-safe: no shared state.
#pragma once

#include <cstdint>
#include <string_view>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::kernels {

enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv };
std::string_view BinaryOpName(BinaryOp op);  // "add", "sub", "mul", "div"

// Elementwise `lhs op rhs` over two tensors of the same dtype and shape (f32 or i32).
// f32 follows IEEE 754 (x / 0 is +-inf or nan). i32 add, sub and mul wrap around on
// overflow (two's complement); div truncates toward zero, INT32_MIN / -1 wraps to
// INT32_MIN, and any zero divisor makes the whole call InvalidArgument.
Result<Tensor> Binary(BinaryOp op, const Tensor& lhs, const Tensor& rhs);

// `tensor op scalar` and `scalar op tensor`: the scalar is first converted to the
// tensor's dtype. For i32 it must be a whole number within int32 range (else
// InvalidArgument); for f32 it is rounded to the nearest float. Same arithmetic as above.
Result<Tensor> Binary(BinaryOp op, const Tensor& lhs, double rhs);
Result<Tensor> Binary(BinaryOp op, double lhs, const Tensor& rhs);

// The elements of the 1-D `input` (f32 or i32) greater than `threshold`, in their order:
// an output whose length depends on the data. Empty when none is.
Result<Tensor> Filter(const Tensor& input, double threshold);

// Longest time Spin accepts: one hour, in microseconds.
inline constexpr double kMaxSpinMicros = 3600e6;

// Keeps the calling thread busy for `microseconds` (a busy-wait on steady_clock: it models
// a device occupied by a kernel, so the thread must not sleep) and returns `input`
// unchanged. 0 returns at once; negative, NaN or more than kMaxSpinMicros is
// InvalidArgument.
Result<Tensor> Spin(Tensor input, double microseconds);

}  // namespace atl::kernels
