// Puts a consumer shard together from the pieces a resharding edge sends it: each piece
// says where it goes in the shard and how many make it whole. Used by the loop thread only.
#pragma once

#include <map>
#include <optional>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/protocol.h"
#include "services/executor/work_item.h"

namespace atl::executor {

class PieceAssembler {
 public:
  // Adds the piece `h` carries (`value`, or the producer's error) to the shard `key`.
  // Returns the whole shard once its last piece came, or the first error a piece carried
  // or met; nullopt while pieces are missing.
  std::optional<Result<Tensor>> Add(const InputKey& key, const proto::TupleHeader& h,
                                    Result<Tensor> value);

  size_t partial() const { return partial_.size(); }

 private:
  struct Partial {
    Tensor value;
    uint32_t left = 0;
    Status failure;
  };
  std::map<InputKey, Partial> partial_;
};

}  // namespace atl::executor
