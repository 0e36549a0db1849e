#include "kernels/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "kernels/check.h"
#include "kernels/matmul_threads.h"
#include "kernels/thread_team.h"

namespace atl::kernels {

using internal::Describe;

namespace {

// A block of a matmul's result is worth a helper thread from this many multiply-adds on:
// waking one costs about as much as a 64^3 product (OpenBLAS threads a call from there too).
constexpr double kMinBlockMacs = 64.0 * 64.0 * 64.0;
// Blocks are cut at multiples of this many rows or columns, a multiple of OpenBLAS's
// kernels' tile sizes, so that no block ends in a ragged tile that a whole one would avoid.
constexpr int64_t kBlockAlign = 16;

// BLAS's general matrix multiply of T: cblas_sgemm for float, cblas_dgemm for double.
void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k, const float* a,
          blasint lda, const float* b, blasint ldb, float* c, blasint ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}
void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k, const double* a,
          blasint lda, const double* b, blasint ldb, double* c, blasint ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

// op(a) x op(b) = out, of T (float or double) row-major, of [m,k] x [k,n].
template <typename T>
struct Product {
  const Tensor& a;
  const Tensor& b;
  MatmulOptions options;
  int64_t m, k, n;
  T* out;

  // Rows [r0, r1) and columns [c0, c1) of `out`, as one BLAS call.
  void Block(int64_t r0, int64_t r1, int64_t c0, int64_t c1) const {
    const int64_t lda = a.shape()[1];
    const int64_t ldb = b.shape()[1];
    // Row r of op(a) starts at a[r][0], or at a[0][r] when a is transposed; column c of
    // op(b) at b[0][c], or at b[c][0].
    const T* a_rows = a.as<T>().data() + (options.transpose_a ? r0 : r0 * lda);
    const T* b_cols = b.as<T>().data() + (options.transpose_b ? c0 * ldb : c0);
    Gemm(options.transpose_a ? CblasTrans : CblasNoTrans,
         options.transpose_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(r1 - r0),
         static_cast<blasint>(c1 - c0), static_cast<blasint>(k), a_rows, static_cast<blasint>(lda),
         b_cols, static_cast<blasint>(ldb), out + r0 * n + c0, static_cast<blasint>(n));
  }
};

// How many blocks a product is cut into for `threads` threads: as many as there are threads,
// unless blocks would fall under kMinBlockMacs or kBlockAlign rows (or columns).
template <typename T>
int64_t Blocks(const Product<T>& p, int threads) {
  const int64_t side = std::max(p.m, p.n);
  const auto by_size = static_cast<int64_t>(static_cast<double>(p.m) * static_cast<double>(p.n) *
                                            static_cast<double>(p.k) / kMinBlockMacs);
  return std::max<int64_t>(
      1, std::min({int64_t{threads}, (side + kBlockAlign - 1) / kBlockAlign, by_size}));
}

// The product, cut along its longer side into blocks that the calling thread's team runs.
template <typename T>
void Run(const Product<T>& p) {
  const int64_t blocks = Blocks(p, MatmulThreads());
  if (blocks == 1) return p.Block(0, p.m, 0, p.n);
  const bool by_rows = p.m >= p.n;
  const int64_t side = by_rows ? p.m : p.n;
  const int64_t tiles = (side + kBlockAlign - 1) / kBlockAlign;
  const auto start = [&](int64_t i) { return std::min(side, tiles * i / blocks * kBlockAlign); };
  internal::MatmulTeam().Run(static_cast<int>(blocks), [&](int i) {
    const int64_t from = start(i), to = start(i + 1);
    if (by_rows) {
      p.Block(from, to, 0, p.n);
    } else {
      p.Block(0, p.m, from, to);
    }
  });
}

}  // namespace

Result<Tensor> Matmul(const Tensor& a, const Tensor& b, MatmulOptions options) {
  ATOLL_RETURN_IF_ERROR(internal::CheckFloat(a, "matmul a"));
  ATOLL_RETURN_IF_ERROR(internal::CheckFloat(b, "matmul b"));
  const char* a_name = options.transpose_a ? "a^T" : "a";
  const char* b_name = options.transpose_b ? "b^T" : "b";
  if (a.dtype() != b.dtype() || a.shape().size() != 2 || b.shape().size() != 2) {
    return InvalidArgument(
        fmt::format("matmul {} x {} needs two matrices of one dtype, got {} x {}", a_name, b_name,
                    Describe(a), Describe(b)));
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
  if (m == 0 || k == 0 || n == 0) return internal::Allocate(a.dtype(), {m, n});  // all zeros
  // Every element is written: BLAS's beta = 0 ignores what the result held.
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(a.dtype(), {m, n}));
  internal::ForFloat(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    Run(Product<T>{a, b, options, m, k, n, out.as<T>().data()});
  });
  return out;
}

}  // namespace atl::kernels
