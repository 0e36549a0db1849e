// Argument checks shared by the kernels in kernels/: each returns InvalidArgument naming what
// was expected and what came, or OK. Internal to the kernel library; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::kernels::internal {

// "f32[2,3]".
std::string Describe(const Tensor& t);

// A shape an output may be built with: no negative dimension and an element count whose
// byte size, in the widest dtype, fits in int64.
Status CheckShape(const Shape& shape, std::string_view what);

// A tensor the kernels can index safely: a known dtype, a valid shape, and exactly as many
// bytes as its dtype and shape need.
Status CheckWellFormed(const Tensor& t, std::string_view what);

// Well formed and of dtype f32 (CheckF32) or i32 (CheckI32).
Status CheckF32(const Tensor& t, std::string_view what);
Status CheckI32(const Tensor& t, std::string_view what);

// Well formed and of a dtype the float kernels compute in: f32 or f64. A bf16 or f16 tensor
// is refused naming the cure: its callers widen storage dtypes to f32 (Cast) and round the
// result back once.
Status CheckFloat(const Tensor& t, std::string_view what);
// Well formed and of an integer dtype (i32 or i64): ids, labels.
Status CheckInteger(const Tensor& t, std::string_view what);
// Well formed, of `dtype`, and of exactly `shape`.
Status CheckTypeShape(const Tensor& t, DType dtype, const Shape& shape, std::string_view what);

// Calls f(T{}) with T float or double for an f32 or f64 `dtype`, int32_t or int64_t for i32
// or i64 (ForInteger); nothing for any other. Callers check the dtype first.
template <typename F>
void ForFloat(DType dtype, F&& f) {
  if (dtype == DType::kF32) f(float{});
  if (dtype == DType::kF64) f(double{});
}
template <typename F>
void ForInteger(DType dtype, F&& f) {
  if (dtype == DType::kI32) f(int32_t{});
  if (dtype == DType::kI64) f(int64_t{});
}

// `axis` of a rank-`rank` tensor as an index in [0, rank); a negative axis counts from the
// end (-1 is the last). InvalidArgument when out of range.
Result<int> NormalizeAxis(int64_t axis, size_t rank, std::string_view what);

// A zero-filled tensor; OutOfMemory instead of an exception when it cannot be allocated.
// `shape` must have passed CheckShape.
Result<Tensor> Allocate(DType dtype, Shape shape);
// The same, its bytes left uninitialized (Tensor::ForOverwrite): only for a kernel that
// writes every element of its result.
Result<Tensor> AllocateForOverwrite(DType dtype, Shape shape);

}  // namespace atl::kernels::internal
