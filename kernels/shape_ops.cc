#include "kernels/shape_ops.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "kernels/check.h"

namespace atl::kernels {

using internal::Describe;

namespace {

// Data movement copies elements as unsigned words of the dtype's size, whatever the dtype:
// f32 and i32 as uint32_t, bf16 and f16 as uint16_t, f64 and i64 as uint64_t.
template <typename Word>
const Word* Words(const Tensor& t) {
  return reinterpret_cast<const Word*>(t.data());
}
template <typename Word>
Word* Words(Tensor& t) {
  return reinterpret_cast<Word*>(t.data());
}

// Calls f(Word{}) with the word of `dtype`'s size; `dtype` is known (CheckWellFormed).
template <typename F>
void ForWord(DType dtype, F&& f) {
  switch (DTypeSize(dtype)) {
    case 2:
      f(uint16_t{});
      return;
    case 4:
      f(uint32_t{});
      return;
    case 8:
      f(uint64_t{});
      return;
  }
}

// Row-major strides, in elements.
std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

int64_t Product(const Shape& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d) n *= shape[d];
  return n;
}

// out[out_off + sum_d i_d * out_stride[d]] = in[in_off + sum_d i_d * in_stride[d]] over every
// index i of `dims`, from dimension d on.
template <typename Word>
void StridedCopy(const Word* in, Word* out, const Shape& dims,
                 const std::vector<int64_t>& in_stride, const std::vector<int64_t>& out_stride,
                 size_t d, int64_t in_off, int64_t out_off) {
  const int64_t n = dims[d];
  if (d + 1 == dims.size()) {
    const int64_t is = in_stride[d];
    const int64_t os = out_stride[d];
    if (is == 1 && os == 1) {
      std::memcpy(out + out_off, in + in_off, static_cast<size_t>(n) * sizeof(Word));
    } else if (is == 0 && os == 1) {
      std::fill_n(out + out_off, n, in[in_off]);  // a broadcast dimension (os is 1)
    } else {
      for (int64_t i = 0; i < n; ++i) out[out_off + i * os] = in[in_off + i * is];
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    StridedCopy(in, out, dims, in_stride, out_stride, d + 1, in_off + i * in_stride[d],
                out_off + i * out_stride[d]);
  }
}

// A matrix transpose in 32x32 tiles, so that both the reads and the writes stay in cache.
template <typename Word>
void Transpose2DWords(const Word* in, Word* out, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t r1 = std::min(rows, r0 + kTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) out[c * rows + r] = in[r * cols + c];
      }
    }
  }
}

}  // namespace

Result<Tensor> Transpose(const Tensor& x, const std::vector<int>& perm) {
  ATOLL_RETURN_IF_ERROR(internal::CheckWellFormed(x, "transpose operand"));
  const size_t rank = x.shape().size();
  std::vector<bool> seen(rank, false);
  bool valid = perm.size() == rank;
  for (size_t d = 0; valid && d < perm.size(); ++d) {
    valid = perm[d] >= 0 && static_cast<size_t>(perm[d]) < rank && !seen[perm[d]];
    if (valid) seen[perm[d]] = true;
  }
  if (!valid) {
    return InvalidArgument(fmt::format("transpose of {} needs a permutation of [0, {}), got [{}]",
                                       Describe(x), rank, fmt::join(perm, ",")));
  }
  Shape out_shape(rank);
  for (size_t d = 0; d < rank; ++d) out_shape[d] = x.shape()[perm[d]];
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(x.dtype(), out_shape));
  if (out.num_elements() == 0) return out;
  if (rank == 0) {
    std::memcpy(out.data(), x.data(), x.nbytes());
    return out;
  }
  const std::vector<int64_t> x_strides = Strides(x.shape());
  std::vector<int64_t> in_stride(rank);  // the input stride of each output dimension
  for (size_t d = 0; d < rank; ++d) in_stride[d] = x_strides[perm[d]];
  ForWord(x.dtype(), [&](auto zero) {
    using Word = decltype(zero);
    if (rank == 2 && perm[0] == 1) {
      Transpose2DWords(Words<Word>(x), Words<Word>(out), x.shape()[0], x.shape()[1]);
    } else {
      StridedCopy(Words<Word>(x), Words<Word>(out), out_shape, in_stride, Strides(out_shape), 0, 0,
                  0);
    }
  });
  return out;
}

Result<Tensor> Transpose2D(const Tensor& x) {
  ATOLL_RETURN_IF_ERROR(internal::CheckWellFormed(x, "transpose operand"));
  if (x.shape().size() != 2) {
    return InvalidArgument(fmt::format("2-D transpose needs a matrix, got {}", Describe(x)));
  }
  return Transpose(x, {1, 0});
}

Result<Tensor> Slice(const Tensor& x, int64_t axis, int64_t start, int64_t end) {
  ATOLL_RETURN_IF_ERROR(internal::CheckWellFormed(x, "slice operand"));
  ATOLL_ASSIGN_OR_RETURN(const int a, internal::NormalizeAxis(axis, x.shape().size(), "slice"));
  const int64_t dim = x.shape()[a];
  if (!(0 <= start && start <= end && end <= dim)) {
    return InvalidArgument(
        fmt::format("slice [{}, {}) of axis {} of {}: expected "
                    "0 <= start <= end <= {}",
                    start, end, a, Describe(x), dim));
  }
  Shape out_shape = x.shape();
  out_shape[a] = end - start;
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(x.dtype(), out_shape));
  const int64_t outer = Product(x.shape(), 0, a);
  const int64_t inner = Product(x.shape(), a + 1, x.shape().size());
  const auto item = static_cast<int64_t>(DTypeSize(x.dtype()));
  const int64_t chunk = (end - start) * inner * item;  // bytes
  if (chunk == 0) return out;
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(out.data() + o * chunk, x.data() + (o * dim + start) * inner * item,
                static_cast<size_t>(chunk));
  }
  return out;
}

Result<Tensor> Concat(std::span<const Tensor> xs, int64_t axis) {
  std::vector<const Tensor*> pointers;
  pointers.reserve(xs.size());
  for (const Tensor& x : xs) pointers.push_back(&x);
  return Concat(std::span<const Tensor* const>(pointers), axis);
}

Result<Tensor> Concat(std::span<const Tensor* const> xs, int64_t axis) {
  if (xs.empty()) return InvalidArgument("concat needs at least one tensor, got none");
  for (size_t i = 0; i < xs.size(); ++i) {
    ATOLL_RETURN_IF_ERROR(internal::CheckWellFormed(*xs[i], fmt::format("concat operand {}", i)));
  }
  const Tensor& first = *xs[0];
  const size_t rank = first.shape().size();
  ATOLL_ASSIGN_OR_RETURN(const int a, internal::NormalizeAxis(axis, rank, "concat"));
  Shape out_shape = first.shape();
  out_shape[a] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = *xs[i];
    bool same = x.dtype() == first.dtype() && x.shape().size() == rank;
    for (size_t d = 0; same && d < rank; ++d) {
      same = static_cast<int>(d) == a || x.shape()[d] == first.shape()[d];
    }
    if (!same) {
      return InvalidArgument(fmt::format(
          "concat along axis {}: operand {} is {}, expected {} with the shape of operand 0 "
          "({}) except along the axis",
          a, i, Describe(x), DTypeName(first.dtype()), Describe(first)));
    }
    out_shape[a] += x.shape()[a];
  }
  ATOLL_RETURN_IF_ERROR(internal::CheckShape(out_shape, "concat result"));
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(first.dtype(), out_shape));
  const int64_t outer = Product(out_shape, 0, a);
  const auto inner_bytes =
      Product(out_shape, a + 1, rank) * static_cast<int64_t>(DTypeSize(first.dtype()));
  std::byte* dst = out.data();
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor* x : xs) {
      const int64_t chunk = x->shape()[a] * inner_bytes;
      if (chunk == 0) continue;
      std::memcpy(dst, x->data() + o * chunk, static_cast<size_t>(chunk));
      dst += chunk;
    }
  }
  return out;
}

Result<std::vector<Tensor>> Split(const Tensor& x, int64_t axis, int64_t parts) {
  ATOLL_RETURN_IF_ERROR(internal::CheckWellFormed(x, "split operand"));
  ATOLL_ASSIGN_OR_RETURN(const int a, internal::NormalizeAxis(axis, x.shape().size(), "split"));
  const int64_t dim = x.shape()[a];
  if (parts < 1 || dim % parts != 0) {
    return InvalidArgument(
        fmt::format("split of axis {} of {} into {} parts: expected a "
                    "positive count dividing {}",
                    a, Describe(x), parts, dim));
  }
  const int64_t piece = dim / parts;
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(parts));
  for (int64_t p = 0; p < parts; ++p) {
    ATOLL_ASSIGN_OR_RETURN(Tensor t, Slice(x, a, p * piece, (p + 1) * piece));
    out.push_back(std::move(t));
  }
  return out;
}

Result<Tensor> Reshape(const Tensor& x, Shape shape) {
  ATOLL_RETURN_IF_ERROR(internal::CheckWellFormed(x, "reshape operand"));
  ATOLL_RETURN_IF_ERROR(internal::CheckShape(shape, "reshape"));
  if (NumElements(shape) != x.num_elements()) {
    return InvalidArgument(fmt::format("reshape of {} ({} elements) to {} ({} elements)",
                                       Describe(x), x.num_elements(), ShapeString(shape),
                                       NumElements(shape)));
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(x.dtype(), std::move(shape)));
  if (x.nbytes() > 0) std::memcpy(out.data(), x.data(), x.nbytes());
  return out;
}

Result<Tensor> PutColumn(const Tensor& column, int64_t width, int64_t j) {
  ATOLL_RETURN_IF_ERROR(internal::CheckWellFormed(column, "put_column operand"));
  if (column.shape().size() != 1 || j < 0 || j >= width) {
    return InvalidArgument(fmt::format(
        "put_column of {} as column {} of {}: expected a vector and a column in [0, {})",
        Describe(column), j, width, width));
  }
  const int64_t m = column.shape()[0];
  ATOLL_RETURN_IF_ERROR(internal::CheckShape({m, width}, "put_column result"));
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(column.dtype(), {m, width}));
  const size_t elem = DTypeSize(column.dtype());
  for (int64_t i = 0; i < m; ++i) {
    std::memcpy(out.data() + (i * width + j) * elem, column.data() + i * elem, elem);
  }
  return out;
}

Result<Tensor> ExpandDims(const Tensor& x, int64_t axis) {
  ATOLL_RETURN_IF_ERROR(internal::CheckWellFormed(x, "expand_dims operand"));
  const auto rank = static_cast<int64_t>(x.shape().size());
  if (axis < 0 || axis > rank) {
    return InvalidArgument(
        fmt::format("expand_dims of {} at axis {}: expected an axis in "
                    "[0, {}]",
                    Describe(x), axis, rank));
  }
  Shape shape = x.shape();
  shape.insert(shape.begin() + axis, 1);
  return Reshape(x, std::move(shape));
}

Result<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {  // i counts from the right
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) {
      return InvalidArgument(
          fmt::format("{} and {} do not broadcast: dimension {} from the "
                      "right is {} against {}, expected equal or 1",
                      ShapeString(a), ShapeString(b), i, da, db));
    }
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

Result<Tensor> BroadcastTo(const Tensor& x, const Shape& shape) {
  ATOLL_RETURN_IF_ERROR(internal::CheckWellFormed(x, "broadcast operand"));
  ATOLL_RETURN_IF_ERROR(internal::CheckShape(shape, "broadcast target"));
  auto joint = BroadcastShapes(x.shape(), shape);
  if (!joint.ok() || *joint != shape) {
    return InvalidArgument(
        fmt::format("cannot broadcast {} to {}: expected each dimension of "
                    "the operand to be 1 or equal to the target's",
                    Describe(x), ShapeString(shape)));
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(x.dtype(), shape));
  if (out.num_elements() == 0) return out;
  if (shape.empty()) {
    std::memcpy(out.data(), x.data(), x.nbytes());
    return out;
  }
  // The operand's shape padded with leading 1s; a dimension of 1 has input stride 0.
  const size_t rank = shape.size();
  Shape padded(rank, 1);
  std::copy(x.shape().begin(), x.shape().end(), padded.begin() + (rank - x.shape().size()));
  std::vector<int64_t> in_stride = Strides(padded);
  for (size_t d = 0; d < rank; ++d) {
    if (padded[d] == 1) in_stride[d] = 0;
  }
  ForWord(x.dtype(), [&](auto zero) {
    using Word = decltype(zero);
    StridedCopy(Words<Word>(x), Words<Word>(out), shape, in_stride, Strides(shape), 0, 0, 0);
  });
  return out;
}

}  // namespace atl::kernels
