#include "services/executor/tuple_frames.h"

#include <fmt/format.h>

#include "common/net/tensor_frames.h"

namespace atl::executor {

namespace {

// The bytes a packed tuple takes in the packed frame, at most `limit` (what is left of it).
Result<size_t> PackedBytes(const proto::TupleHeader& h, size_t limit) {
  if (h.error_code != 0) return size_t{0};
  ATOLL_ASSIGN_OR_RETURN(const uint64_t bytes, CheckedNumBytes(h.dtype, h.shape));
  if (bytes > limit) {
    return InvalidArgument(fmt::format("packed tuple {}{} does not fit in the {} bytes left",
                                       DTypeName(h.dtype), ShapeString(h.shape), limit));
  }
  return static_cast<size_t>(bytes);
}

}  // namespace

size_t TupleFrames::Add(proto::TupleHeader& h, Result<Tensor> value) {
  if (!value.ok()) {
    h.error_code = static_cast<int32_t>(value.status().code());
    h.error = value.status().message();
    h.packed = true;  // no bytes at all
    any_packed_ = true;
    return 0;
  }
  h.dtype = value->dtype();
  h.shape = value->shape();
  const size_t bytes = value->nbytes();
  h.packed = bytes < kPackBytes;
  if (h.packed) {
    packed_.insert(packed_.end(), value->data(), value->data() + bytes);
    any_packed_ = true;
  } else {
    own_.push_back(net::BorrowedFrame(std::move(value).value()));
  }
  return bytes;
}

net::Frames TupleFrames::Take() {
  net::Frames frames;
  frames.reserve(own_.size() + 1);
  if (any_packed_) frames.emplace_back(packed_.data(), packed_.size());
  for (auto& frame : own_) frames.push_back(std::move(frame));
  packed_.clear();
  any_packed_ = false;
  own_.clear();
  return frames;
}

Result<std::vector<Result<Tensor>>> TupleValues(const proto::TupleBatch& batch,
                                                net::Frames& frames) {
  const auto packed = static_cast<size_t>(std::count_if(batch.tuples.begin(), batch.tuples.end(),
                                                        [](const auto& h) { return h.packed; }));
  const size_t want = batch.tuples.size() - packed + (packed > 0 ? 1 : 0);
  if (frames.size() != want) {
    return InvalidArgument(
        fmt::format("tuple batch has {} headers, {} of them packed, but {} data frames",
                    batch.tuples.size(), packed, frames.size()));
  }
  // Every packed tuple's place in the packed frame, checked before any value is made.
  const size_t packed_size = packed > 0 ? frames[0].size() : 0;
  std::vector<size_t> offsets;
  offsets.reserve(packed + 1);
  offsets.push_back(0);
  for (const auto& h : batch.tuples) {
    if (!h.packed) continue;
    ATOLL_ASSIGN_OR_RETURN(const size_t bytes, PackedBytes(h, packed_size - offsets.back()));
    offsets.push_back(offsets.back() + bytes);
  }
  if (offsets.back() != packed_size) {
    return InvalidArgument(
        fmt::format("packed tuples take {} bytes of the {} packed", offsets.back(), packed_size));
  }

  std::vector<Result<Tensor>> values;
  values.reserve(batch.tuples.size());
  const auto* pack = packed > 0 ? static_cast<const std::byte*>(frames[0].data()) : nullptr;
  size_t next_packed = 0;
  size_t next_own = packed > 0 ? 1 : 0;
  for (const auto& h : batch.tuples) {
    if (h.error_code != 0) {
      values.emplace_back(Status(static_cast<Code>(h.error_code), h.error));
    } else if (h.packed) {
      values.push_back(Tensor::FromBytes(
          h.dtype, h.shape, {pack + offsets[next_packed], pack + offsets[next_packed + 1]}));
    } else {
      values.push_back(net::AdoptFrame(h.dtype, h.shape, frames[next_own]));
    }
    next_packed += h.packed ? 1 : 0;
    next_own += h.packed ? 0 : 1;
  }
  return values;
}

}  // namespace atl::executor
