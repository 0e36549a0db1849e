// Matrix multiply of f32 or f64 matrices, with either operand optionally transposed, through
// OpenBLAS cblas_sgemm or cblas_dgemm: one call threaded by OpenBLAS, or blocks on the calling
// thread's share of the cores (kernels/matmul_threads.h). Pure: returns a new tensor, never throws.
// Thread-safe.
#pragma once

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::kernels {

struct MatmulOptions {
  bool transpose_a = false;  // use a^T: a is [k,m] instead of [m,k]
  bool transpose_b = false;  // use b^T: b is [n,k] instead of [k,n]
};

// op(a) x op(b) -> [m,n] of their dtype, where op(a) is [m,k] and op(b) is [k,n]. Any of m,
// k, n may be 0; k = 0 gives an all-zero [m,n]. InvalidArgument when the operands are not
// well-formed f32 or f64 matrices of one dtype, when the inner dimensions differ, or when a
// dimension exceeds INT32_MAX. Example: Matmul(x, w, {.transpose_b = true}) is x w^T.
Result<Tensor> Matmul(const Tensor& a, const Tensor& b, MatmulOptions options);

}  // namespace atl::kernels
