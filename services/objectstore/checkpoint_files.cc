#include "services/objectstore/checkpoint_files.h"

#include <cstring>
#include <map>

#include "common/base/tensor_block.h"
#include "common/checkpoint/index.h"
#include "common/checkpoint/npy.h"
#include "services/objectstore/checkpoint_dir.h"
#include "services/objectstore/directory.h"

namespace atl::store {

namespace {

std::span<const std::byte> BytesOf(std::string_view text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

// The .npy file a piece is cut from, checked against what the index says of it.
Result<Tensor> ReadCheckpointFile(const CheckpointDir& dir, const proto::FilePiece& piece,
                                  const std::atomic<bool>& stop) {
  ATOLL_ASSIGN_OR_RETURN(const std::vector<std::byte> bytes,
                         dir.Read(piece.file, piece.bytes, &stop));
  const uint32_t crc = Crc32(bytes);
  if (bytes.size() != piece.bytes || crc != piece.crc32) {
    return InvalidArgument("file '" + piece.file + "' of checkpoint '" + dir.path() + "' is " +
                           std::to_string(bytes.size()) + " bytes with CRC-32 " +
                           std::to_string(crc) + "; the index says " + std::to_string(piece.bytes) +
                           " bytes with CRC-32 " + std::to_string(piece.crc32) +
                           ": it is corrupt, or not this save's");
  }
  auto tensor = checkpoint::ParseNpy(bytes);
  if (!tensor.ok()) {
    return tensor.status().WithContext("file '" + piece.file + "' of checkpoint '" + dir.path() +
                                       "'");
  }
  return tensor;
}

}  // namespace

Result<proto::SaveShardsReply> WriteNpyFiles(const std::string& root, const std::string& dir,
                                             const std::vector<NpyToWrite>& files,
                                             const std::atomic<bool>& stop) {
  ATOLL_ASSIGN_OR_RETURN(CheckpointDir open, CheckpointDir::Open(root, dir, /*create=*/true));
  proto::SaveShardsReply reply;
  for (const NpyToWrite& f : files) {
    ATOLL_ASSIGN_OR_RETURN(const std::string header, checkpoint::EncodeNpyHeader(f.dtype, f.shape));
    ATOLL_ASSIGN_OR_RETURN(const CheckpointDir::Written written,
                           open.Write(f.name, {BytesOf(header), f.data}, &stop));
    reply.files.push_back({f.name, written.bytes, written.crc32});
  }
  return reply;
}

Result<size_t> CommitIndex(const std::string& root, const std::string& dir,
                           const std::string& index, const std::set<std::string>& keep) {
  // Only an index that Load can read is written under the name that makes a checkpoint whole.
  ATOLL_RETURN_IF_ERROR(checkpoint::IndexFromJson(index).status());
  ATOLL_ASSIGN_OR_RETURN(CheckpointDir open, CheckpointDir::Open(root, dir, /*create=*/false));
  ATOLL_RETURN_IF_ERROR(open.Write(checkpoint::kIndexFile, {BytesOf(index)}).status());
  ATOLL_ASSIGN_OR_RETURN(const size_t removed, open.RemoveDataExcept(keep));
  ATOLL_RETURN_IF_ERROR(open.Sync());
  return removed;
}

Result<std::string> ReadIndex(const std::string& root, const std::string& dir,
                              const std::string& host) {
  // No directory, or no index in it: no checkpoint, said the same way.
  auto missing = [&](const std::string& why) {
    return NotFound("no complete checkpoint at '" + dir + "' on host " + host + ": " + why);
  };
  auto open = CheckpointDir::Open(root, dir, /*create=*/false);
  if (!open.ok() && open.status().code() == Code::kNotFound) {
    return missing("nothing was saved there");
  }
  if (!open.ok()) return open.status();
  auto bytes = open->Read(checkpoint::kIndexFile, kMaxIndexBytes);
  if (!bytes.ok() && bytes.status().code() == Code::kNotFound) {
    return missing("it has no " + std::string(checkpoint::kIndexFile) +
                   " (a save that did not finish leaves none)");
  }
  if (!bytes.ok()) return bytes.status();
  return std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size());
}

Status ReadShards(const std::string& root, const std::string& dir,
                  const std::vector<proto::ShardFromFiles>& shards,
                  const std::vector<std::span<std::byte>>& targets, const std::atomic<bool>& stop) {
  ATOLL_ASSIGN_OR_RETURN(const CheckpointDir open,
                         CheckpointDir::Open(root, dir, /*create=*/false));
  // Every shard is assembled before the first is written: a load that fails leaves nothing.
  std::map<std::string, Tensor> files;  // each read once
  std::vector<Tensor> assembled;
  for (const proto::ShardFromFiles& s : shards) {
    const std::string name = ShardName(s.object_id, s.shard);
    Tensor shard(s.dtype, s.shape);
    int64_t covered = 0;
    for (const proto::FilePiece& piece : s.pieces) {
      auto it = files.find(piece.file);
      if (it == files.end()) {
        ATOLL_ASSIGN_OR_RETURN(Tensor file, ReadCheckpointFile(open, piece, stop));
        it = files.emplace(piece.file, std::move(file)).first;
      }
      const Tensor& file = it->second;
      if (file.dtype() != s.dtype || file.shape() != piece.file_shape) {
        return InvalidArgument("file '" + piece.file + "' of checkpoint '" + dir + "' holds " +
                               std::string(DTypeName(file.dtype())) + ShapeString(file.shape()) +
                               ", not the " + std::string(DTypeName(s.dtype)) +
                               ShapeString(piece.file_shape) + " the index says");
      }
      ATOLL_ASSIGN_OR_RETURN(const Tensor block, ExtractBlock(file, piece.begin, piece.size));
      ATOLL_RETURN_IF_ERROR(InsertBlock(shard, block, piece.at).WithContext(name));
      covered += block.num_elements();
    }
    if (covered != shard.num_elements()) {
      return InvalidArgument(name + ": its pieces cover " + std::to_string(covered) + " of its " +
                             std::to_string(shard.num_elements()) + " elements");
    }
    assembled.push_back(std::move(shard));
  }
  files.clear();
  for (size_t i = 0; i < assembled.size(); ++i) {
    if (targets[i].size() != assembled[i].nbytes()) {
      return Internal(ShardName(shards[i].object_id, shards[i].shard) + ": " +
                      std::to_string(assembled[i].nbytes()) + " bytes for a block of " +
                      std::to_string(targets[i].size()));
    }
    if (!targets[i].empty()) std::memcpy(targets[i].data(), assembled[i].data(), targets[i].size());
  }
  return Status::Ok();
}

}  // namespace atl::store
