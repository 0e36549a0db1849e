// Puts a consumer shard together from the pieces sent to it: blocks of a resharding edge,
// each saying where it goes in the shard, or the rows each producer shard of a sparse
// exchange routed to it (joined in producer order; a producer with none sends an empty
// piece, so the count tells when every producer was heard from). Used by the loop thread.
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
  struct Partial {
    Tensor value;                             // blocks are written into it
    std::vector<std::optional<Tensor>> rows;  // by producer part
    uint32_t left = 0;
    Status failure;
  };
  Status AddBlock(Partial& p, const proto::TupleHeader& h, const Tensor& block);
  Status AddRows(Partial& p, const proto::TupleHeader& h, Tensor rows);
  static Result<Tensor> Finish(Partial& p, bool rows);

  std::map<InputKey, Partial> partial_;
};

}  // namespace atl::executor
