// The jax.lax primitives that move data: each is one strided walk over its result (or its
// operand), copying elements of the dtype's size, so that one loop serves every dtype.
#include <algorithm>
#include <cstring>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/base/dtype_types.h"
#include "kernels/check.h"
#include "kernels/lax.h"
#include "kernels/nd_index.h"

namespace atl::kernels {

namespace {

using internal::RowMajorStrides;

// out[i_0, ..., i_r-1] = in[base + sum_d i_d * in_strides[d]] for every index of `out`'s
// shape: a transpose (permuted strides), a broadcast (stride 0), a slice (strides times the
// step, base at the start), a reverse (negative strides, base at the end).
// n elements of kSize bytes, `src_stride` elements apart, to `dst_stride` apart: a fixed-size
// memcpy compiles to one load and store, where a runtime size is a call per element.
template <size_t kSize>
void CopyRun(std::byte* dst, int64_t dst_stride, const std::byte* src, int64_t src_stride,
             int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + i * dst_stride * kSize, src + i * src_stride * kSize, kSize);
  }
}

void CopyRun(size_t size, std::byte* dst, int64_t dst_stride, const std::byte* src,
             int64_t src_stride, int64_t n) {
  switch (size) {
    case 1:
      return CopyRun<1>(dst, dst_stride, src, src_stride, n);
    case 2:
      return CopyRun<2>(dst, dst_stride, src, src_stride, n);
    case 4:
      return CopyRun<4>(dst, dst_stride, src, src_stride, n);
    case 8:
      return CopyRun<8>(dst, dst_stride, src, src_stride, n);
    default:
      for (int64_t i = 0; i < n; ++i) {
        std::memcpy(dst + i * dst_stride * size, src + i * src_stride * size, size);
      }
  }
}

void LaxStridedCopy(const Tensor& in, int64_t base, const std::vector<int64_t>& in_strides,
                    Tensor& out) {
  const size_t size = DTypeSize(in.dtype());
  const int64_t n = out.num_elements();
  if (n == 0) return;
  // Dimensions of size 1 go, and a dimension whose elements lie one inner block apart in `in`
  // joins the inner one: fewer, longer runs (a transpose of [b, t, h, d] is one of 3).
  Shape shape;
  std::vector<int64_t> strides;
  for (size_t d = 0; d < out.shape().size(); ++d) {
    if (out.shape()[d] == 1) continue;
    if (!shape.empty() && strides.back() == in_strides[d] * out.shape()[d]) {
      shape.back() *= out.shape()[d];
      strides.back() = in_strides[d];
    } else {
      shape.push_back(out.shape()[d]);
      strides.push_back(in_strides[d]);
    }
  }
  const std::byte* src = in.data();
  std::byte* dst = out.data();
  if (shape.empty()) {
    std::memcpy(dst, src + base * size, size);
    return;
  }
  const size_t rank = shape.size();
  std::vector<int64_t> index(rank, 0);
  int64_t from = base;
  // The innermost dimension is a run of copies at one stride; the outer ones are an odometer.
  const int64_t inner = shape[rank - 1];
  const int64_t inner_stride = strides[rank - 1];
  for (int64_t done = 0; done < n; done += inner) {
    if (inner_stride == 1) {
      std::memcpy(dst, src + from * size, inner * size);
    } else {
      CopyRun(size, dst, 1, src + from * size, inner_stride, inner);
    }
    dst += inner * size;
    for (size_t d = rank - 1; d-- > 0;) {  // the next outer index
      from += strides[d];
      if (++index[d] < shape[d]) break;
      from -= strides[d] * shape[d];
      index[d] = 0;
    }
  }
}

Status NeedRank(std::string_view op, const Tensor& x, size_t want, const std::vector<int64_t>& v) {
  if (v.size() == want) return Status::Ok();
  return InvalidArgument(fmt::format("{}: {} needs {} values per dimension list, got [{}]", op,
                                     internal::Describe(x), want, fmt::join(v, ",")));
}

}  // namespace

Result<Tensor> BroadcastInDim(const Tensor& x, const Shape& shape,
                              const std::vector<int64_t>& dims) {
  ATOLL_RETURN_IF_ERROR(NeedRank("broadcast_in_dim", x, x.shape().size(), dims));
  const std::vector<int64_t> from = RowMajorStrides(x.shape());
  std::vector<int64_t> strides(shape.size(), 0);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(shape.size()) ||
        (x.shape()[i] != 1 && x.shape()[i] != shape[dims[i]])) {
      return InvalidArgument(fmt::format("broadcast_in_dim: {} into {} along [{}]",
                                         internal::Describe(x), ShapeString(shape),
                                         fmt::join(dims, ",")));
    }
    if (x.shape()[i] != 1) strides[dims[i]] = from[i];
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(x.dtype(), shape));
  LaxStridedCopy(x, 0, strides, out);
  return out;
}

Result<Tensor> TransposeNd(const Tensor& x, const std::vector<int64_t>& perm) {
  ATOLL_RETURN_IF_ERROR(NeedRank("transpose_nd", x, x.shape().size(), perm));
  const std::vector<int64_t> from = RowMajorStrides(x.shape());
  Shape shape;
  std::vector<int64_t> strides;
  for (int64_t d : perm) {
    if (d < 0 || d >= static_cast<int64_t>(x.shape().size())) {
      return InvalidArgument(
          fmt::format("transpose_nd: [{}] is not a permutation of {}'s "
                      "dimensions",
                      fmt::join(perm, ","), internal::Describe(x)));
    }
    shape.push_back(x.shape()[d]);
    strides.push_back(from[d]);
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(x.dtype(), shape));
  LaxStridedCopy(x, 0, strides, out);
  return out;
}

Result<Tensor> Slice(const Tensor& x, const std::vector<int64_t>& start,
                     const std::vector<int64_t>& limit, const std::vector<int64_t>& strides) {
  const size_t n = x.shape().size();
  ATOLL_RETURN_IF_ERROR(NeedRank("slice", x, n, start));
  ATOLL_RETURN_IF_ERROR(NeedRank("slice", x, n, limit));
  ATOLL_RETURN_IF_ERROR(NeedRank("slice", x, n, strides));
  const std::vector<int64_t> from = RowMajorStrides(x.shape());
  Shape shape(n);
  std::vector<int64_t> walk(n);
  int64_t base = 0;
  for (size_t d = 0; d < n; ++d) {
    if (start[d] < 0 || start[d] > limit[d] || limit[d] > x.shape()[d] || strides[d] < 1) {
      return InvalidArgument(fmt::format("slice: dimension {} of {}: [{}, {}) by {}", d,
                                         internal::Describe(x), start[d], limit[d], strides[d]));
    }
    shape[d] = limit[d] == start[d] ? 0 : (limit[d] - start[d] - 1) / strides[d] + 1;
    walk[d] = from[d] * strides[d];
    base += start[d] * from[d];
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(x.dtype(), shape));
  LaxStridedCopy(x, base, walk, out);
  return out;
}

Result<Tensor> Concatenate(std::span<const Tensor* const> xs, int64_t dim) {
  if (xs.empty()) return InvalidArgument("concatenate needs at least one operand");
  const Tensor& first = *xs[0];
  const size_t rank = first.shape().size();
  if (dim < 0 || dim >= static_cast<int64_t>(rank)) {
    return InvalidArgument(
        fmt::format("concatenate: dimension {} of {}", dim, internal::Describe(first)));
  }
  Shape shape = first.shape();
  shape[dim] = 0;
  for (const Tensor* x : xs) {
    Shape like = x->shape();
    if (like.size() == rank) like[dim] = 0;
    if (x->dtype() != first.dtype() || like != Shape(shape.begin(), shape.end())) {
      return InvalidArgument(fmt::format("concatenate: {} does not join {} along {}",
                                         internal::Describe(*x), internal::Describe(first), dim));
    }
  }
  for (const Tensor* x : xs) shape[dim] += x->shape()[dim];
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(first.dtype(), shape));
  // Each of the outer rows (dimensions before dim) is every operand's row in turn.
  const size_t size = DTypeSize(first.dtype());
  const int64_t outer =
      std::accumulate(shape.begin(), shape.begin() + dim, int64_t{1}, std::multiplies<>());
  const int64_t inner =
      std::accumulate(shape.begin() + dim + 1, shape.end(), int64_t{1}, std::multiplies<>());
  std::byte* dst = out.data();
  for (int64_t row = 0; row < outer; ++row) {
    for (const Tensor* x : xs) {
      const auto bytes = static_cast<size_t>(x->shape()[dim] * inner) * size;
      if (bytes > 0) std::memcpy(dst, x->data() + row * bytes, bytes);
      dst += bytes;
    }
  }
  return out;
}

Result<Tensor> Pad(const Tensor& x, const Tensor& value, const std::vector<int64_t>& low,
                   const std::vector<int64_t>& high, const std::vector<int64_t>& interior) {
  const size_t n = x.shape().size();
  ATOLL_RETURN_IF_ERROR(NeedRank("pad", x, n, low));
  ATOLL_RETURN_IF_ERROR(NeedRank("pad", x, n, high));
  ATOLL_RETURN_IF_ERROR(NeedRank("pad", x, n, interior));
  if (value.dtype() != x.dtype() || value.num_elements() != 1) {
    return InvalidArgument(fmt::format("pad: the value {} must be one element of {}'s dtype",
                                       internal::Describe(value), internal::Describe(x)));
  }
  Shape shape(n);
  for (size_t d = 0; d < n; ++d) {
    const int64_t inner = x.shape()[d] == 0 ? 0 : x.shape()[d] + (x.shape()[d] - 1) * interior[d];
    shape[d] = low[d] + inner + high[d];
    if (shape[d] < 0 || interior[d] < 0) {
      return InvalidArgument(
          fmt::format("pad: dimension {} of {} gets size {}", d, internal::Describe(x), shape[d]));
    }
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(x.dtype(), shape));
  const size_t size = DTypeSize(x.dtype());
  CopyRun(size, out.data(), 1, value.data(), 0, out.num_elements());
  // Element i of x along dimension d lands at low + i * (interior + 1), unless a negative low
  // or high cut it off: the elements kept are a box, [first, first + count) per dimension.
  const std::vector<int64_t> from = RowMajorStrides(x.shape());
  const std::vector<int64_t> to = RowMajorStrides(shape);
  std::vector<int64_t> first(n), count(n);
  for (size_t d = 0; d < n; ++d) {
    const int64_t step = interior[d] + 1;
    first[d] = low[d] >= 0 ? 0 : (-low[d] + step - 1) / step;
    const int64_t end = shape[d] - low[d] <= 0 ? 0 : (shape[d] - low[d] + step - 1) / step;
    count[d] = std::min(x.shape()[d], end) - first[d];
    if (count[d] <= 0) return out;
  }
  if (n == 0) {
    std::memcpy(out.data(), x.data(), size);
    return out;
  }
  std::vector<int64_t> index(n, 0);
  const int64_t inner = count[n - 1];
  const int64_t inner_step = interior[n - 1] + 1;
  for (bool more = true; more;) {
    int64_t src = 0, dst = 0;
    for (size_t d = 0; d < n; ++d) {
      const int64_t i = first[d] + index[d];
      src += i * from[d];
      dst += (low[d] + i * (interior[d] + 1)) * to[d];
    }
    CopyRun(size, out.data() + dst * size, inner_step, x.data() + src * size, 1, inner);
    more = false;
    for (size_t d = n - 1; d-- > 0;) {  // the next outer index of the box
      if (++index[d] < count[d]) {
        more = true;
        break;
      }
      index[d] = 0;
    }
  }
  return out;
}

Result<Tensor> Rev(const Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides = RowMajorStrides(x.shape());
  int64_t base = 0;
  for (int64_t d : dims) {
    if (d < 0 || d >= static_cast<int64_t>(x.shape().size())) {
      return InvalidArgument(fmt::format("rev: dimension {} of {}", d, internal::Describe(x)));
    }
    if (x.shape()[d] > 0) base += (x.shape()[d] - 1) * strides[d];
    strides[d] = -strides[d];
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(x.dtype(), x.shape()));
  LaxStridedCopy(x, base, strides, out);
  return out;
}

Result<Tensor> Iota(DType dtype, const Shape& shape, int64_t dim) {
  if (dim < 0 || dim >= static_cast<int64_t>(shape.size())) {
    return InvalidArgument(fmt::format("iota: dimension {} of shape {}", dim, ShapeString(shape)));
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(dtype, shape));
  const std::vector<int64_t> strides = RowMajorStrides(shape);
  Status status = Status::Ok();
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, BF16> || std::is_same_v<T, F16> || std::is_same_v<T, bool>) {
      status =
          InvalidArgument(fmt::format("iota does not make {} (the backend makes f32 and "
                                      "rounds it)",
                                      DTypeName(dtype)));
    } else {
      T* v = out.as<T>().data();
      for (int64_t i = 0; i < out.num_elements(); ++i) {
        v[i] = static_cast<T>((i / strides[dim]) % shape[dim]);
      }
    }
  });
  ATOLL_RETURN_IF_ERROR(status);
  return out;
}

}  // namespace atl::kernels
