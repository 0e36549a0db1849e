#include "services/executor/piece_assembler.h"

#include <fmt/format.h>

#include "common/tensor_block.h"

namespace atl::executor {

std::optional<Result<Tensor>> PieceAssembler::Add(const InputKey& key, const proto::TupleHeader& h,
                                                  Result<Tensor> value) {
  auto [it, fresh] = partial_.try_emplace(key);
  Partial& p = it->second;
  if (fresh) {
    p.left = h.pieces;
    if (NumElements(h.dst_shape) < 0 || h.dst_shape.size() != h.dst_begin.size()) {
      p.failure = InvalidArgument(fmt::format("a piece names a bad destination shard {} at {}",
                                              ShapeString(h.dst_shape), ShapeString(h.dst_begin)));
    } else {
      p.value = Tensor(h.dtype, h.dst_shape);
    }
  }
  if (p.failure.ok() && !value.ok()) p.failure = value.status();
  if (p.failure.ok() && p.value.shape() != h.dst_shape) {
    p.failure =
        InvalidArgument(fmt::format("pieces of one shard disagree on its shape: {} and {}",
                                    ShapeString(p.value.shape()), ShapeString(h.dst_shape)));
  }
  if (p.failure.ok()) {
    p.failure = InsertBlock(p.value, *value, h.dst_begin).WithContext("reshard piece");
  }
  if (--p.left > 0) return std::nullopt;
  Result<Tensor> whole = p.failure.ok() ? Result<Tensor>(std::move(p.value)) : p.failure;
  partial_.erase(it);
  return whole;
}

}  // namespace atl::executor
