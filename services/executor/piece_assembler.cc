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
    p.rows = rows;
    p.dtype = h.dtype;
    p.shape = h.dst_shape;
    p.pieces = h.pieces;
    p.left = h.pieces;
  }
  if (p.failure.ok() && !value.ok()) p.failure = value.status();
  if (p.failure.ok() && rows != p.rows) {
    p.failure = InvalidArgument("a shard's pieces are both routed rows and blocks");
  }
  if (p.failure.ok()) {
    p.failure =
        rows ? AddRows(p, h, std::move(value).value()) : AddBlock(p, h, std::move(value).value());
  }
  if (--p.left > 0) return std::nullopt;
  Result<Tensor> whole = Finish(p);
  partial_.erase(it);
  return whole;
}

Status PieceAssembler::AddBlock(Partial& p, const proto::TupleHeader& h, Tensor block) {
  if (p.shape != h.dst_shape || p.dtype != block.dtype()) {
    return InvalidArgument(fmt::format("pieces of one shard disagree on it: {}{} and {}{}",
                                       DTypeName(p.dtype), ShapeString(p.shape),
                                       DTypeName(block.dtype()), ShapeString(h.dst_shape)));
  }
  // A real tensor's element count: its bytes exist, so the sum cannot overflow.
  p.block_elements += block.num_elements();
  p.blocks.push_back({h.dst_begin, std::move(block)});
  return Status::Ok();
}

Status PieceAssembler::AddRows(Partial& p, const proto::TupleHeader& h, Tensor rows) {
  if (h.part >= p.pieces || !p.rows_by_part.try_emplace(h.part, std::move(rows)).second) {
    return InvalidArgument(
        fmt::format("rows from producer {} of {} came twice or do not belong", h.part, p.pieces));
  }
  return Status::Ok();
}

Result<Tensor> PieceAssembler::Finish(Partial& p) {
  if (!p.failure.ok()) return p.failure;
  if (p.rows) {
    std::vector<Tensor> parts;
    for (auto& [part, rows] : p.rows_by_part) parts.push_back(std::move(rows));
    auto joined = Concat(parts, 0);
    if (!joined.ok()) return joined.status().WithContext("join routed rows");
    return joined;
  }
  const Result<int64_t> elements = CheckedNumElements(p.shape);
  if (!elements.ok()) return elements.status().WithContext("a piece's destination shard");
  if (*elements != p.block_elements) {
    return InvalidArgument(fmt::format("the pieces of a {} shard hold {} elements",
                                       ShapeString(p.shape), p.block_elements));
  }
  Tensor whole(p.dtype, p.shape);
  for (const Block& b : p.blocks) {
    ATOLL_RETURN_IF_ERROR(InsertBlock(whole, b.value, b.begin).WithContext("reshard piece"));
  }
  return whole;
}

}  // namespace atl::executor
