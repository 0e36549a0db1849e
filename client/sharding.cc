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
  // Shards of a dynamic dimension differ in length along `dim`; nothing else may differ.
  Shape shape = first.shape();
  shape[dim] = 0;
  for (const auto& s : shards) {
    Shape other = s.shape();
    if (s.dtype() != first.dtype() || other.size() != shape.size()) {
      return InvalidArgument("shards to assemble differ in dtype or rank");
    }
    shape[dim] += other[dim];
    other[dim] = first.shape()[dim];
    if (other != first.shape()) {
      return InvalidArgument(
          fmt::format("shards to assemble along dimension {} differ in "
                      "another dimension: {} and {}",
                      dim, ShapeString(first.shape()), ShapeString(s.shape())));
    }
  }
  Tensor out(first.dtype(), shape);
  const Split3 whole = Around(shape, dim);
  const size_t out_row = static_cast<size_t>(whole.dim * whole.inner) * DTypeSize(first.dtype());
  size_t at = 0;  // where the current shard's block starts inside each output row
  for (const auto& part : shards) {
    const Split3 s = Around(part.shape(), dim);
    const size_t row = static_cast<size_t>(s.dim * s.inner) * DTypeSize(first.dtype());
    if (row == 0) continue;  // an empty shard (its data pointer may be null)
    for (int64_t o = 0; o < s.outer; ++o) {
      std::memcpy(out.data() + o * out_row + at, part.data() + o * row, row);
    }
    at += row;
  }
  return out;
}

}  // namespace atl
