// What saving and loading a checkpoint asks of each object store, planned from where a
// tensor's shards are and from the checkpoint's index; pure, so that it is tested without a
// cluster. Client::Save and Client::Load (checkpoint.cc) send the plans.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "client/lowering.h"
#include "common/checkpoint/index.h"
#include "common/proto/protocol.h"

namespace atl {

// One tensor to save: a future whose shards are in the object stores, or a value this
// client holds.
struct SaveSource {
  std::string name;
  const ResultPlan* plan = nullptr;
  const Tensor* value = nullptr;
};

struct SavePlan {
  // The index, each block's bytes and CRC-32 still 0 until its store has written it.
  checkpoint::Index index;
  // By store endpoint. Each holds the values too, in `values` order: every store that takes
  // part writes them, so that each host's directory has them.
  std::map<std::string, proto::SaveShards> per_store;
  std::vector<const Tensor*> values;
  // Which reply tells each block's size and CRC: that store's files[file].
  struct BlockSource {
    size_t tensor = 0;
    size_t block = 0;
    std::string store;
    size_t file = 0;
  };
  std::vector<BlockSource> sources;
  std::vector<std::string> files;  // every file of the checkpoint
};

// Plans the files of `tensors` (names checked and distinct; futures with static shapes):
// one per distinct block of a future (the first replica of each, written by the store that
// holds it), one per value. `tag` makes this save's file names new; `host_of` names the
// host of a store endpoint, for the index. InvalidArgument when nothing is a future: the
// stores that hold futures are the ones that write.
Result<SavePlan> PlanSave(const std::vector<SaveSource>& tensors, uint64_t client,
                          const std::string& dir, const std::string& tag,
                          const std::function<std::string(const std::string&)>& host_of);

// Fills the index's block sizes and CRCs from the stores' replies (by store endpoint).
Status ApplySaveReplies(SavePlan& plan,
                        const std::map<std::string, proto::SaveShardsReply>& replies);

// Adds to `per_store` the shards of tensor `entry` laid out as `target` over `mesh`, shard i
// on stores[i], as object `object_id`: each shard made of the pieces of the saved blocks
// that overlap it, so that any layout of the same global tensor loads. InvalidArgument when
// `target` is not `entry`'s dtype and shape or does not fit `mesh`. Returns the result plan
// of the loaded tensor.
Result<ResultPlan> PlanLoad(const checkpoint::TensorEntry& entry, const ir::TensorType& target,
                            const Shape& mesh, const std::vector<std::string>& stores,
                            uint64_t client, const std::string& dir, uint64_t object_id,
                            std::map<std::string, proto::LoadShards>& per_store);

}  // namespace atl
