// Puts a consumer shard together from the pieces sent to it: blocks of a resharding edge,
// each saying where it goes in the shard, or the rows each producer shard of a sparse
// exchange routed to it (joined in producer order; a producer with none sends an empty
// piece, so the count tells when every producer was heard from). Used by the loop thread.
//
// Pieces come from the wire, so what they declare (the shard's shape, how many pieces make
// it) is not trusted with memory: the pieces are kept as they came, and the shard is made
// only once the last one came and the blocks add up to it, so a shard never costs more
// than the bytes its pieces carried.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/proto/protocol.h"
#include "services/executor/work_item.h"

namespace atl::executor {

class PieceAssembler {
 public:
  // A shard is made of at most one piece per producer shard; a header naming more is
  // refused, before anything is sized by it.
  static constexpr uint32_t kMaxPieces = 1 << 16;

  // Adds the piece `h` carries (`value`, or the producer's error) to the shard `key`.
  // Returns the whole shard once its last piece came, or the first error a piece carried
  // or met; nullopt while pieces are missing.
  std::optional<Result<Tensor>> Add(const InputKey& key, const proto::TupleHeader& h,
                                    Result<Tensor> value);

  size_t partial() const { return partial_.size(); }

 private:
  struct Block {
    Shape begin;  // in the shard
    Tensor value;
  };
  // A shard some of whose pieces came; what it is comes from its first piece.
  struct Partial {
    bool rows = false;  // routed rows, else blocks
    DType dtype = DType::kF32;
    Shape shape;
    uint32_t pieces = 0;  // that make the shard
    uint32_t left = 0;    // of them still to come
    std::vector<Block> blocks;
    int64_t block_elements = 0;  // in all the blocks
    std::map<uint32_t, Tensor> rows_by_part;
    Status failure;
  };
  static Status AddBlock(Partial& p, const proto::TupleHeader& h, Tensor block);
  static Status AddRows(Partial& p, const proto::TupleHeader& h, Tensor rows);
  static Result<Tensor> Finish(Partial& p);

  std::map<InputKey, Partial> partial_;
};

}  // namespace atl::executor
