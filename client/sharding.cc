#include "client/sharding.h"

#include <cstring>

#include <fmt/format.h>

namespace atl {

namespace {

// Row-major layout seen as [outer, dim, inner] around `dim`.
struct Split3 {
  int64_t outer = 1, dim = 1, inner = 1;
};

Split3 Around(const Shape& shape, int dim) {
  Split3 s;
  for (int i = 0; i < dim; ++i) s.outer *= shape[i];
  s.dim = shape[dim];
  for (size_t i = dim + 1; i < shape.size(); ++i) s.inner *= shape[i];
  return s;
}

}  // namespace

Result<Tensor> ShardOf(const Tensor& t, int dim, int parts, int index) {
  if (dim < 0) return t;
  if (static_cast<size_t>(dim) >= t.shape().size() || parts <= 0 || t.shape()[dim] % parts != 0 ||
      index < 0 || index >= parts) {
    return InvalidArgument(fmt::format("cannot cut {} into {} parts along dimension {}",
                                       ShapeString(t.shape()), parts, dim));
  }
  const Split3 s = Around(t.shape(), dim);
  const int64_t block = s.dim / parts;
  Shape shape = t.shape();
  shape[dim] = block;
  Tensor out(t.dtype(), shape);
  const size_t row = static_cast<size_t>(block * s.inner) * DTypeSize(t.dtype());
  const size_t stride = static_cast<size_t>(s.dim * s.inner) * DTypeSize(t.dtype());
  const size_t skip = static_cast<size_t>(index * block * s.inner) * DTypeSize(t.dtype());
  for (int64_t o = 0; o < s.outer; ++o) {
    std::memcpy(out.data() + o * row, t.data() + o * stride + skip, row);
  }
  return out;
}

Result<Tensor> Assemble(const std::vector<Tensor>& shards, int dim) {
  if (shards.empty()) return InvalidArgument("no shards to assemble");
  if (dim < 0) {
    // Replicas must agree: a difference means devices diverged, which is a bug.
    for (size_t i = 1; i < shards.size(); ++i) {
      if (!(shards[i] == shards[0])) {
        return Internal(
            fmt::format("replicated value differs between shard 0 ({}) and shard {} ({})",
                        shards[0].ToString(), i, shards[i].ToString()));
      }
    }
    return shards[0];
  }
  const Tensor& first = shards[0];
  if (static_cast<size_t>(dim) >= first.shape().size()) {
    return InvalidArgument(
        fmt::format("cannot join along dimension {} of {}", dim, ShapeString(first.shape())));
  }
  for (const auto& s : shards) {
    if (s.dtype() != first.dtype() || s.shape() != first.shape()) {
      return InvalidArgument("shards to assemble differ in dtype or shape");
    }
  }
  Shape shape = first.shape();
  shape[dim] *= static_cast<int64_t>(shards.size());
  Tensor out(first.dtype(), shape);
  const Split3 s = Around(first.shape(), dim);
  const size_t row = static_cast<size_t>(s.dim * s.inner) * DTypeSize(first.dtype());
  for (int64_t o = 0; o < s.outer; ++o) {
    for (size_t p = 0; p < shards.size(); ++p) {
      std::memcpy(out.data() + (o * shards.size() + p) * row, shards[p].data() + o * row, row);
    }
  }
  return out;
}

}  // namespace atl
