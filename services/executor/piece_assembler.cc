#include "services/executor/piece_assembler.h"

#include <fmt/format.h>

#include "common/base/tensor_block.h"

namespace atl::executor {

std::optional<Result<Tensor>> PieceAssembler::Add(const InputKey& key, const proto::TupleHeader& h,
                                                  Result<Tensor> value) {
  if (h.pieces > kMaxPieces) {
    // Not kept: a shard waiting for billions of pieces would be held for ever.
    return InvalidArgument(
        fmt::format("a shard made of {} pieces (at most {})", h.pieces, kMaxPieces));
  }
  const bool rows = h.kind == proto::TupleHeader::kRows;
  auto [it, fresh] = partial_.try_emplace(key);
  Partial& p = it->second;
  if (fresh) {
    p.left = h.pieces;
    if (rows) {
      p.rows.resize(h.pieces);
    } else if (auto bytes = CheckedNumBytes(h.dtype, h.dst_shape); !bytes.ok()) {
      p.failure = bytes.status().WithContext("a piece's destination shard");
    } else if (h.dst_shape.size() != h.dst_begin.size()) {
      p.failure = InvalidArgument(fmt::format("a piece names a bad destination shard {} at {}",
                                              ShapeString(h.dst_shape), ShapeString(h.dst_begin)));
    } else {
      p.value = Tensor(h.dtype, h.dst_shape);
    }
  }
  if (p.failure.ok() && !value.ok()) p.failure = value.status();
  if (p.failure.ok()) {
    p.failure = rows ? AddRows(p, h, std::move(value).value()) : AddBlock(p, h, *value);
  }
  if (--p.left > 0) return std::nullopt;
  Result<Tensor> whole = Finish(p, rows);
  partial_.erase(it);
  return whole;
}

Status PieceAssembler::AddBlock(Partial& p, const proto::TupleHeader& h, const Tensor& block) {
  if (p.value.shape() != h.dst_shape) {
    return InvalidArgument(fmt::format("pieces of one shard disagree on its shape: {} and {}",
                                       ShapeString(p.value.shape()), ShapeString(h.dst_shape)));
  }
  return InsertBlock(p.value, block, h.dst_begin).WithContext("reshard piece");
}

Status PieceAssembler::AddRows(Partial& p, const proto::TupleHeader& h, Tensor rows) {
  if (h.part >= p.rows.size() || p.rows[h.part]) {
    return InvalidArgument(fmt::format("rows from producer {} of {} came twice or do not belong",
                                       h.part, p.rows.size()));
  }
  p.rows[h.part] = std::move(rows);
  return Status::Ok();
}

Result<Tensor> PieceAssembler::Finish(Partial& p, bool rows) {
  if (!p.failure.ok()) return p.failure;
  if (!rows) return std::move(p.value);
  std::vector<Tensor> parts;
  for (auto& r : p.rows) parts.push_back(std::move(*r));
  auto joined = Concat(parts, 0);
  if (!joined.ok()) return joined.status().WithContext("join routed rows");
  return joined;
}

}  // namespace atl::executor
