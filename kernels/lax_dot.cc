// dot_general: batched products on OpenBLAS for f32 and f64 (plain loops for integers), each
// operand read where it lies: a batch of [m, k] matrices at any offsets, rows and columns at
// any strides BLAS takes (one of them 1), so that an einsum's `bqhd` operand (batch dims
// b and h, not leading) is no copy. Only an operand whose free or contracting dimensions do
// not lie evenly in memory is first copied into [batch, m, k] order.
#include <algorithm>
#include <optional>
#include <type_traits>

#include <cblas.h>
#include <fmt/format.h>

#include "common/base/dtype_types.h"
#include "kernels/check.h"
#include "kernels/lax.h"
#include "kernels/nd_index.h"

namespace atl::kernels {

namespace {

template <typename T>
constexpr bool kComputes = !std::is_same_v<T, BF16> && !std::is_same_v<T, F16>;

// The dimensions of a rank-`rank` operand that are in neither list.
std::vector<int64_t> FreeDims(size_t rank, const std::vector<int64_t>& a,
                              const std::vector<int64_t>& b) {
  std::vector<int64_t> free;
  for (int64_t d = 0; d < static_cast<int64_t>(rank); ++d) {
    if (std::find(a.begin(), a.end(), d) == a.end() &&
        std::find(b.begin(), b.end(), d) == b.end()) {
      free.push_back(d);
    }
  }
  return free;
}

int64_t DimsProduct(const Shape& shape, const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= shape[d];
  return p;
}

// The stride of one index running row-major over `dims` of a tensor of `shape` and
// `strides`, when those dimensions lie evenly in memory (each outer one spans the inner ones
// exactly); nullopt when they do not. Dimensions of size 1 do not count; 0 when none is
// left (one position: any stride will do).
std::optional<int64_t> GroupStride(const Shape& shape, const std::vector<int64_t>& strides,
                                   const std::vector<int64_t>& dims) {
  int64_t stride = 0, span = 0;
  for (size_t i = dims.size(); i-- > 0;) {
    const int64_t d = dims[i];
    if (shape[d] == 1) continue;
    if (span == 0) {
      stride = strides[d];
      span = shape[d];
    } else if (strides[d] == stride * span) {
      span *= shape[d];
    } else {
      return std::nullopt;
    }
  }
  return stride;
}

// One operand as BLAS reads it: a matrix of `rows` x `cols` (lhs: m x k; rhs: k x n) at
// data + offset[p] for batch p, stored row-major with leading dimension `ld`, or column-major
// (BLAS's transpose) when `trans`.
struct MatrixView {
  std::vector<int64_t> offsets;
  bool trans = false;
  int64_t ld = 1;
};

// The view of an operand whose batch dims are `batch`, row dims `row_dims`, column dims
// `col_dims`; nullopt when BLAS cannot read it in place.
std::optional<MatrixView> ViewOf(const Shape& shape, const std::vector<int64_t>& batch,
                                 const std::vector<int64_t>& row_dims,
                                 const std::vector<int64_t>& col_dims) {
  const std::vector<int64_t> strides = internal::RowMajorStrides(shape);
  const std::optional<int64_t> rs = GroupStride(shape, strides, row_dims);
  const std::optional<int64_t> cs = GroupStride(shape, strides, col_dims);
  if (!rs || !cs) return std::nullopt;
  const int64_t rows = DimsProduct(shape, row_dims), cols = DimsProduct(shape, col_dims);
  MatrixView view;
  if (rows == 0 || cols == 0) {
    // An empty matrix: BatchedProduct writes zeros or nothing, never calling BLAS.
  } else if (cols <= 1 || *cs == 1) {
    view.ld = rows <= 1 ? std::max<int64_t>(cols, 1) : *rs;
    if (view.ld < std::max<int64_t>(cols, 1)) return std::nullopt;
  } else if (rows <= 1 || *rs == 1) {
    view.trans = true;
    view.ld = cols <= 1 ? std::max<int64_t>(rows, 1) : *cs;
    if (view.ld < std::max<int64_t>(rows, 1)) return std::nullopt;
  } else {
    return std::nullopt;
  }
  Shape batch_shape;
  for (int64_t d : batch) batch_shape.push_back(shape[d]);
  const int64_t count = DimsProduct(shape, batch);
  std::vector<int64_t> index(batch.size(), 0);
  view.offsets.reserve(static_cast<size_t>(count));
  for (int64_t p = 0; p < count; ++p) {
    int64_t at = 0;
    for (size_t i = 0; i < batch.size(); ++i) at += index[i] * strides[batch[i]];
    view.offsets.push_back(at);
    internal::NextIndex(index, batch_shape);
  }
  return view;
}

// c[p] = a[p] x b[p], [m,k] x [k,n] into the row-major [m,n] at c + p m n, for each batch p.
template <typename T>
void BatchedProduct(const T* a, const MatrixView& av, const T* b, const MatrixView& bv, T* c,
                    int64_t m, int64_t k, int64_t n) {
  const int64_t lda = av.ld, ldb = bv.ld;
  const bool trans_a = av.trans, trans_b = bv.trans;
  const auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  for (size_t p = 0; p < av.offsets.size(); ++p) {
    const T* ap = a + av.offsets[p];
    const T* bp = b + bv.offsets[p];
    T* cp = c + static_cast<int64_t>(p) * m * n;
    if (m == 0 || n == 0) continue;
    if (k == 0) {
      std::fill(cp, cp + m * n, T{0});
      continue;
    }
    if constexpr (std::is_same_v<T, float>) {
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, ap, lda, bp, ldb, 0.0f, cp, n);
    } else if constexpr (std::is_same_v<T, double>) {
      cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, ap, lda, bp, ldb, 0.0, cp, n);
    } else {
      // Integers wrap (computed unsigned); bool is no operand here.
      using U = std::make_unsigned_t<T>;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          U sum = 0;
          for (int64_t q = 0; q < k; ++q) {
            const T x = trans_a ? ap[q * lda + i] : ap[i * lda + q];
            const T y = trans_b ? bp[j * ldb + q] : bp[q * ldb + j];
            sum += static_cast<U>(x) * static_cast<U>(y);
          }
          cp[i * n + j] = static_cast<T>(sum);
        }
      }
    }
  }
}

// `x` as a tensor of `to` (the operands of a dot_general with a preferred element type), in
// the same layout.
template <typename To>
Tensor Widened(const Tensor& x, DType to) {
  Tensor out = Tensor::ForOverwrite(to, x.shape());
  To* w = out.as<To>().data();
  VisitDType(x.dtype(), [&](auto zero) {
    using From = decltype(zero);
    if constexpr (kComputes<From>) {
      const From* v = x.as<From>().data();
      for (int64_t i = 0; i < x.num_elements(); ++i) w[i] = static_cast<To>(v[i]);
    }
  });
  return out;
}

// An operand BLAS reads in place, or its copy in [batch, rows, cols] order when it cannot.
struct Placed {
  std::optional<Tensor> copy;
  MatrixView view;
};

Result<Placed> Place(const Tensor& x, const std::vector<int64_t>& batch,
                     const std::vector<int64_t>& row_dims, const std::vector<int64_t>& col_dims) {
  Placed placed;
  if (auto view = ViewOf(x.shape(), batch, row_dims, col_dims)) {
    placed.view = std::move(*view);
    return placed;
  }
  std::vector<int64_t> perm = batch;
  perm.insert(perm.end(), row_dims.begin(), row_dims.end());
  perm.insert(perm.end(), col_dims.begin(), col_dims.end());
  ATOLL_ASSIGN_OR_RETURN(placed.copy.emplace(), TransposeNd(x, perm));
  // The copy's dimensions are in order: the three groups are consecutive and contiguous.
  auto range = [](size_t from, size_t count) {
    std::vector<int64_t> dims(count);
    for (size_t i = 0; i < count; ++i) dims[i] = static_cast<int64_t>(from + i);
    return dims;
  };
  const size_t nb = batch.size(), nr = row_dims.size(), nc = col_dims.size();
  auto view = ViewOf(placed.copy->shape(), range(0, nb), range(nb, nr), range(nb + nr, nc));
  if (!view) return Internal("dot_general: a transposed operand is not a plain matrix");
  placed.view = std::move(*view);
  return placed;
}

}  // namespace

Result<Tensor> DotGeneral(const Tensor& lhs, const Tensor& rhs, const DotDims& dims, DType out) {
  const Shape& ls = lhs.shape();
  const Shape& rs = rhs.shape();
  const std::vector<int64_t> lfree = FreeDims(ls.size(), dims.lhs_contracting, dims.lhs_batch);
  const std::vector<int64_t> rfree = FreeDims(rs.size(), dims.rhs_contracting, dims.rhs_batch);
  const int64_t batch = DimsProduct(ls, dims.lhs_batch);
  const int64_t m = DimsProduct(ls, lfree);
  const int64_t k = DimsProduct(ls, dims.lhs_contracting);
  const int64_t n = DimsProduct(rs, rfree);
  if (k != DimsProduct(rs, dims.rhs_contracting) || batch != DimsProduct(rs, dims.rhs_batch) ||
      dims.lhs_batch.size() != dims.rhs_batch.size()) {
    return InvalidArgument(fmt::format("dot_general: {} and {} do not contract",
                                       internal::Describe(lhs), internal::Describe(rhs)));
  }
  for (size_t i = 0; i < dims.lhs_batch.size(); ++i) {
    if (ls[dims.lhs_batch[i]] != rs[dims.rhs_batch[i]]) {
      return InvalidArgument(fmt::format("dot_general: batch dimensions {} of {} and {} of {}",
                                         dims.lhs_batch[i], internal::Describe(lhs),
                                         dims.rhs_batch[i], internal::Describe(rhs)));
    }
  }
  ATOLL_ASSIGN_OR_RETURN(const Placed a, Place(lhs, dims.lhs_batch, lfree, dims.lhs_contracting));
  ATOLL_ASSIGN_OR_RETURN(const Placed b, Place(rhs, dims.rhs_batch, dims.rhs_contracting, rfree));
  Shape shape;
  for (int64_t d : dims.lhs_batch) shape.push_back(ls[d]);
  for (int64_t d : lfree) shape.push_back(ls[d]);
  for (int64_t d : rfree) shape.push_back(rs[d]);
  // Every element is written: a product (BLAS's beta = 0 ignores what it held) or a zero.
  ATOLL_ASSIGN_OR_RETURN(Tensor result, internal::AllocateForOverwrite(out, shape));
  Status status = Status::Ok();
  VisitDType(out, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!kComputes<T> || std::is_same_v<T, bool>) {
      status = InvalidArgument(fmt::format("dot_general does not compute in {}", DTypeName(out)));
    } else {
      const Tensor& at = a.copy ? *a.copy : lhs;
      const Tensor& bt = b.copy ? *b.copy : rhs;
      std::optional<Tensor> wa, wb;
      if (at.dtype() != out) wa = Widened<T>(at, out);
      if (bt.dtype() != out) wb = Widened<T>(bt, out);
      BatchedProduct((wa ? *wa : at).template as<T>().data(), a.view,
                     (wb ? *wb : bt).template as<T>().data(), b.view, result.as<T>().data(), m, k,
                     n);
    }
  });
  ATOLL_RETURN_IF_ERROR(status);
  return result;
}

}  // namespace atl::kernels
