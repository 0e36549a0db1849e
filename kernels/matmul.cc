#include "kernels/matmul.h"

#include <cblas.h>

#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "kernels/check.h"

namespace atl::kernels {

using internal::Describe;

Result<Tensor> Matmul(const Tensor& a, const Tensor& b, MatmulOptions options) {
  ATOLL_RETURN_IF_ERROR(internal::CheckF32(a, "matmul a"));
  ATOLL_RETURN_IF_ERROR(internal::CheckF32(b, "matmul b"));
  const char* a_name = options.transpose_a ? "a^T" : "a";
  const char* b_name = options.transpose_b ? "b^T" : "b";
  if (a.shape().size() != 2 || b.shape().size() != 2) {
    return InvalidArgument(fmt::format("matmul {} x {} needs two matrices, got {} x {}", a_name,
                                       b_name, Describe(a), Describe(b)));
  }
  const int64_t m = a.shape()[options.transpose_a ? 1 : 0];
  const int64_t k = a.shape()[options.transpose_a ? 0 : 1];
  const int64_t kb = b.shape()[options.transpose_b ? 1 : 0];
  const int64_t n = b.shape()[options.transpose_b ? 0 : 1];
  if (k != kb) {
    return InvalidArgument(
        fmt::format("matmul {} x {} needs [m,k] x [k,n]: inner dimensions {} and {} differ "
                    "(got {} x {})",
                    a_name, b_name, k, kb, Describe(a), Describe(b)));
  }
  constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();
  if (m > kMaxDim || k > kMaxDim || n > kMaxDim) {
    return InvalidArgument(
        fmt::format("matmul dimension above {}: {} x {}", kMaxDim, Describe(a), Describe(b)));
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(DType::kF32, {m, n}));
  if (m == 0 || k == 0 || n == 0) return out;  // zero-filled: already the answer
  cblas_sgemm(CblasRowMajor, options.transpose_a ? CblasTrans : CblasNoTrans,
              options.transpose_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a.as<float>().data(),
              static_cast<blasint>(a.shape()[1]), b.as<float>().data(),
              static_cast<blasint>(b.shape()[1]), 0.0f, out.as<float>().data(),
              static_cast<blasint>(n));
  return out;
}

}  // namespace atl::kernels
