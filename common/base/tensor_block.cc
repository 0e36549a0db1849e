#include "common/base/tensor_block.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace atl {

namespace {

Status CheckInside(const Shape& whole, const Shape& begin, const Shape& size) {
  bool inside = begin.size() == whole.size() && size.size() == whole.size();
  for (size_t d = 0; inside && d < whole.size(); ++d) {
    // Not begin + size <= whole: a begin that came off the wire could make that wrap.
    inside = begin[d] >= 0 && size[d] >= 0 && size[d] <= whole[d] && begin[d] <= whole[d] - size[d];
  }
  if (inside) return Status::Ok();
  return InvalidArgument(fmt::format("a block {} at {} does not lie inside {}", ShapeString(size),
                                     ShapeString(begin), ShapeString(whole)));
}

// Calls copy(outer_offset_in_whole, offset_in_block) in elements, once per contiguous row
// (the last dimension) of the block.
template <typename Copy>
void ForEachRow(const Shape& whole, const Shape& begin, const Shape& size, Copy copy) {
  const size_t rank = whole.size();
  if (NumElements(size) == 0) return;
  if (rank == 0) {
    copy(0, 0);
    return;
  }
  const int64_t rows = NumElements(size) / size[rank - 1];
  Shape index(rank, 0);  // the row's index inside the block (last dimension stays 0)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t at = 0;
    for (size_t d = 0; d < rank; ++d) at = at * whole[d] + begin[d] + index[d];
    copy(at, row * size[rank - 1]);
    for (size_t d = rank - 1; d-- > 0;) {  // next row: odometer over the leading dimensions
      if (++index[d] < size[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

Result<Tensor> ExtractBlock(const Tensor& src, const Shape& begin, const Shape& size) {
  ATOLL_RETURN_IF_ERROR(CheckInside(src.shape(), begin, size));
  // The whole tensor (a replicated or one-device shard): one pass, not a zero fill and a copy.
  if (size == src.shape()) return Tensor(src);
  Tensor out(src.dtype(), size);
  const size_t elem = DTypeSize(src.dtype());
  const size_t row = size.empty() ? elem : static_cast<size_t>(size.back()) * elem;
  ForEachRow(src.shape(), begin, size, [&](int64_t from, int64_t to) {
    std::memcpy(out.data() + to * elem, src.data() + from * elem, row);
  });
  return out;
}

Status InsertBlock(Tensor& dst, const Tensor& block, const Shape& begin) {
  if (block.dtype() != dst.dtype()) {
    return InvalidArgument(fmt::format("a {} block cannot go into a {} tensor",
                                       DTypeName(block.dtype()), DTypeName(dst.dtype())));
  }
  ATOLL_RETURN_IF_ERROR(CheckInside(dst.shape(), begin, block.shape()));
  const size_t elem = DTypeSize(dst.dtype());
  const Shape& size = block.shape();
  const size_t row = size.empty() ? elem : static_cast<size_t>(size.back()) * elem;
  ForEachRow(dst.shape(), begin, size, [&](int64_t to, int64_t from) {
    std::memcpy(dst.data() + to * elem, block.data() + from * elem, row);
  });
  return Status::Ok();
}

Result<Tensor> Concat(const std::vector<Tensor>& parts, size_t dim) {
  if (parts.empty()) return InvalidArgument("nothing to join");
  const Tensor& first = parts[0];
  Shape shape = first.shape();
  if (dim >= shape.size()) {
    return InvalidArgument(
        fmt::format("cannot join along dimension {} of {}", dim, ShapeString(shape)));
  }
  shape[dim] = 0;
  for (const auto& part : parts) {
    Shape other = part.shape();
    if (part.dtype() != first.dtype() || other.size() != shape.size()) {
      return InvalidArgument("parts to join differ in dtype or rank");
    }
    shape[dim] += other[dim];
    other[dim] = first.shape()[dim];
    if (other != first.shape()) {
      return InvalidArgument(
          fmt::format("parts to join along dimension {} differ in another dimension: {} and {}",
                      dim, ShapeString(first.shape()), ShapeString(part.shape())));
    }
  }
  Tensor out(first.dtype(), shape);
  Shape at(shape.size(), 0);
  for (const auto& part : parts) {
    ATOLL_RETURN_IF_ERROR(InsertBlock(out, part, at));
    at[dim] += part.shape()[dim];
  }
  return out;
}

Result<Tensor> SelectRows(const Tensor& values, const Tensor& destinations, int32_t destination) {
  if (values.shape().empty() || destinations.dtype() != DType::kI32 ||
      destinations.shape() != Shape{values.shape()[0]}) {
    return InvalidArgument(
        fmt::format("rows {} need i32[{}] destinations, got {}{}", ShapeString(values.shape()),
                    values.shape().empty() ? 0 : values.shape()[0], DTypeName(destinations.dtype()),
                    ShapeString(destinations.shape())));
  }
  const auto dest = destinations.as<int32_t>();
  Shape shape = values.shape();
  shape[0] = std::count(dest.begin(), dest.end(), destination);
  Tensor out(values.dtype(), shape);
  const size_t row = values.shape()[0] == 0 ? 0 : values.nbytes() / values.shape()[0];
  size_t at = 0;
  for (size_t i = 0; i < dest.size(); ++i) {
    if (dest[i] != destination) continue;
    std::memcpy(out.data() + at, values.data() + i * row, row);
    at += row;
  }
  return out;
}

}  // namespace atl
