// The disk side of the object store's checkpoint requests (docs/design-notes.md,
// "Checkpoints"), run on its CheckpointWorker's thread: these functions touch files and the
// memory handed to them, never the Directory or a socket. The loop checks each request,
// pins the memory it reads or fills, posts one of these and replies with what it returns
// (store_checkpoints.cc). `root` is the client's checkpoint root, `dir` the checkpoint's
// path below it (CheckpointDir). `stop` set: they return Cancelled within a chunk.
#pragma once

#include <atomic>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/proto/protocol.h"

namespace atl::store {

// An index is small next to the tensors it lists; a larger file is no index.
constexpr uint64_t kMaxIndexBytes = 64ull << 20;

// One .npy file of a save: its header made from `dtype` and `shape`, then `data` (a pinned
// shard's memory, or a value's data frame), which must stay valid until the job returns.
struct NpyToWrite {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  std::span<const std::byte> data;
};

// Writes `files` into `dir` (made when missing), each whole or not at all; the reply lists
// them in order with their sizes and CRC-32s.
Result<proto::SaveShardsReply> WriteNpyFiles(const std::string& root, const std::string& dir,
                                             const std::vector<NpyToWrite>& files,
                                             const std::atomic<bool>& stop);

// Checks that `index` is one Load can read (checkpoint::IndexFromJson), writes it as the
// index file of `dir` (the last file of a save), then removes the data files `keep` does
// not name; returns how many it removed.
Result<size_t> CommitIndex(const std::string& root, const std::string& dir,
                           const std::string& index, const std::set<std::string>& keep);

// The text of the index of `dir`. NotFound, naming `host`, when there is no complete
// checkpoint there.
Result<std::string> ReadIndex(const std::string& root, const std::string& dir,
                              const std::string& host);

// Assembles each shard of `shards` from its pieces (each file read once and checked against
// what the index says of it) and writes it whole into `targets[i]` (nbytes of the shard).
// Nothing is written into a target unless every shard could be assembled.
Status ReadShards(const std::string& root, const std::string& dir,
                  const std::vector<proto::ShardFromFiles>& shards,
                  const std::vector<std::span<std::byte>>& targets, const std::atomic<bool>& stop);

}  // namespace atl::store
