// The object store's side of checkpoints (docs/design-notes.md, "Checkpoints"): writing the
// shards it holds as .npy files, completing a checkpoint with its index, reading an index,
// and reading files back into new objects. The bytes go between the store's memory and its
// disk; the client sends only names and places.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/base/tensor_block.h"
#include "common/checkpoint/index.h"
#include "common/checkpoint/npy.h"
#include "common/proto/ids.h"
#include "services/objectstore/checkpoint_dir.h"
#include "services/objectstore/store_service.h"

namespace atl::store {

namespace {

// An index is small next to the tensors it lists; a larger file is no index.
constexpr uint64_t kMaxIndexBytes = 64ull << 20;

std::span<const std::byte> BytesOf(std::string_view text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

// The .npy file a piece is cut from, checked against what the index says of it.
Result<Tensor> ReadCheckpointFile(const CheckpointDir& dir, const proto::FilePiece& piece) {
  ATOLL_ASSIGN_OR_RETURN(const std::vector<std::byte> bytes, dir.Read(piece.file, piece.bytes));
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

Result<std::string> StoreService::CheckpointRootOf(const proto::Incoming& in, uint64_t client,
                                                   std::string_view action) {
  ATOLL_ASSIGN_OR_RETURN(const std::string user, owners_.ClientUser(client));
  ATOLL_RETURN_IF_ERROR(proto::RequireClient(in.sender, client, user, action));
  if (options_.checkpoint_root.empty()) {
    return FailedPrecondition("the object store of host " + options_.host +
                              " has no checkpoint root (the config's [checkpoints] root, or "
                              "--checkpoint-root)");
  }
  const std::string key = proto::Peer{user}.client_key();
  if (key.empty()) return options_.checkpoint_root;  // plain text: no key to keep apart
  if (!checkpoint::CheckTensorName(key).ok()) {
    return PermissionDenied("client key '" + key + "' cannot name a checkpoint directory");
  }
  return options_.checkpoint_root + "/" + key;
}

Status StoreService::OnSaveShards(const proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::SaveShards>());
  ATOLL_ASSIGN_OR_RETURN(const std::string root,
                         CheckpointRootOf(in, req.owner_client, "save a checkpoint"));
  if (in.data.size() != req.values.size()) {
    return InvalidArgument("SaveShards with " + std::to_string(req.values.size()) +
                           " values needs as many data frames, got " +
                           std::to_string(in.data.size()));
  }
  // Everything is checked before the first file is written.
  struct File {
    const std::string* name;
    DType dtype;
    const Shape* shape;
    std::span<const std::byte> data;
  };
  std::vector<File> files;
  for (const proto::ShardFile& s : req.shards) {
    ATOLL_RETURN_IF_ERROR(checkpoint::CheckFileName(s.file));
    if (proto::ClientOfObject(s.object_id) != req.owner_client) {
      return PermissionDenied("client " + std::to_string(req.owner_client) +
                              " may save only its own objects: object " +
                              std::to_string(s.object_id) + " is client " +
                              std::to_string(proto::ClientOfObject(s.object_id)) + "'s");
    }
    ATOLL_ASSIGN_OR_RETURN(const ShardInfo* info, directory_.Find(s.object_id, s.shard));
    const std::string shard = ShardName(s.object_id, s.shard);
    if (!info->sealed) return FailedPrecondition(shard + " is not sealed yet");
    if (!info->error.ok()) return info->error.WithContext("cannot save " + shard);
    files.push_back(
        {&s.file, info->dtype, &info->shape, {arena_.data() + info->offset, info->nbytes}});
  }
  for (size_t i = 0; i < req.values.size(); ++i) {
    const proto::ValueFile& v = req.values[i];
    ATOLL_RETURN_IF_ERROR(checkpoint::CheckFileName(v.file));
    ATOLL_ASSIGN_OR_RETURN(const uint64_t nbytes, CheckedNumBytes(v.dtype, v.shape));
    if (in.data[i].size() != nbytes) {
      return InvalidArgument("value '" + v.file + "' is " + std::string(DTypeName(v.dtype)) +
                             ShapeString(v.shape) + ": " + std::to_string(nbytes) +
                             " bytes, its data frame has " + std::to_string(in.data[i].size()));
    }
    files.push_back({&v.file,
                     v.dtype,
                     &v.shape,
                     {static_cast<const std::byte*>(in.data[i].data()), in.data[i].size()}});
  }
  ATOLL_ASSIGN_OR_RETURN(CheckpointDir dir, CheckpointDir::Open(root, req.dir, /*create=*/true));
  proto::SaveShardsReply reply;
  uint64_t bytes = 0;
  for (const File& f : files) {
    ATOLL_ASSIGN_OR_RETURN(const std::string header,
                           checkpoint::EncodeNpyHeader(f.dtype, *f.shape));
    ATOLL_ASSIGN_OR_RETURN(const CheckpointDir::Written written,
                           dir.Write(*f.name, {BytesOf(header), f.data}));
    reply.files.push_back({*f.name, written.bytes, written.crc32});
    bytes += written.bytes;
  }
  Send(ReplyToOf(in), reply);
  events_.Publish("checkpoint.written", {{"host", options_.host},
                                         {"owner", req.owner_client},
                                         {"dir", req.dir},
                                         {"files", uint64_t{files.size()}},
                                         {"bytes", bytes}});
  return Status::Ok();
}

Status StoreService::OnCommitCheckpoint(const proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::CommitCheckpoint>());
  ATOLL_ASSIGN_OR_RETURN(const std::string root,
                         CheckpointRootOf(in, req.owner_client, "commit a checkpoint"));
  if (req.index.size() > kMaxIndexBytes) {
    return InvalidArgument("a checkpoint index is at most " + std::to_string(kMaxIndexBytes) +
                           " bytes");
  }
  // Only an index that Load can read is written under the name that makes a checkpoint whole.
  ATOLL_RETURN_IF_ERROR(checkpoint::IndexFromJson(req.index).status());
  std::set<std::string> keep;
  for (const std::string& file : req.files) {
    ATOLL_RETURN_IF_ERROR(checkpoint::CheckFileName(file));
    keep.insert(file);
  }
  ATOLL_ASSIGN_OR_RETURN(CheckpointDir dir, CheckpointDir::Open(root, req.dir, /*create=*/false));
  ATOLL_RETURN_IF_ERROR(dir.Write(checkpoint::kIndexFile, {BytesOf(req.index)}).status());
  ATOLL_ASSIGN_OR_RETURN(const size_t removed, dir.RemoveDataExcept(keep));
  ATOLL_RETURN_IF_ERROR(dir.Sync());
  Send(ReplyToOf(in), proto::Ok{});
  events_.Publish("checkpoint.committed", {{"host", options_.host},
                                           {"owner", req.owner_client},
                                           {"dir", req.dir},
                                           {"stale_files_removed", uint64_t{removed}}});
  return Status::Ok();
}

Status StoreService::OnReadCheckpointIndex(const proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::ReadCheckpointIndex>());
  ATOLL_ASSIGN_OR_RETURN(const std::string root,
                         CheckpointRootOf(in, req.client, "read a checkpoint"));
  // No directory, or no index in it: no checkpoint, said the same way.
  auto missing = [&](const std::string& why) {
    return NotFound("no complete checkpoint at '" + req.dir + "' on host " + options_.host + ": " +
                    why);
  };
  auto dir = CheckpointDir::Open(root, req.dir, /*create=*/false);
  if (!dir.ok() && dir.status().code() == Code::kNotFound) {
    return missing("nothing was saved there");
  }
  if (!dir.ok()) return dir.status();
  auto bytes = dir->Read(checkpoint::kIndexFile, kMaxIndexBytes);
  if (!bytes.ok() && bytes.status().code() == Code::kNotFound) {
    return missing("it has no " + std::string(checkpoint::kIndexFile) +
                   " (a save that did not finish leaves none)");
  }
  if (!bytes.ok()) return bytes.status();
  Send(ReplyToOf(in), proto::CheckpointIndexText{std::string(
                          reinterpret_cast<const char*>(bytes->data()), bytes->size())});
  return Status::Ok();
}

Status StoreService::OnLoadShards(const proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::LoadShards>());
  ATOLL_ASSIGN_OR_RETURN(const std::string root,
                         CheckpointRootOf(in, req.owner_client, "load a checkpoint"));
  for (const proto::ShardFromFiles& s : req.shards) {
    ATOLL_RETURN_IF_ERROR(CheckNewObject(in, s.object_id, req.owner_client));
  }
  ATOLL_ASSIGN_OR_RETURN(const CheckpointDir dir,
                         CheckpointDir::Open(root, req.dir, /*create=*/false));
  // Every shard is assembled before the first is created: a load that fails leaves nothing.
  std::map<std::string, Tensor> files;  // each read once
  std::vector<Tensor> shards;
  for (const proto::ShardFromFiles& s : req.shards) {
    const std::string name = ShardName(s.object_id, s.shard);
    ATOLL_ASSIGN_OR_RETURN(const uint64_t nbytes, Directory::ShardBytes(s.dtype, s.shape));
    if (!directory_.CanEverFit(MemoryPools::kHost, nbytes)) {
      return OutOfMemory(name + " needs " + std::to_string(nbytes) + " bytes, more than host " +
                         options_.host + "'s object-store arena holds");
    }
    Tensor shard(s.dtype, s.shape);
    int64_t covered = 0;
    for (const proto::FilePiece& piece : s.pieces) {
      auto it = files.find(piece.file);
      if (it == files.end()) {
        ATOLL_ASSIGN_OR_RETURN(Tensor file, ReadCheckpointFile(dir, piece));
        it = files.emplace(piece.file, std::move(file)).first;
      }
      const Tensor& file = it->second;
      if (file.dtype() != s.dtype || file.shape() != piece.file_shape) {
        return InvalidArgument("file '" + piece.file + "' of checkpoint '" + req.dir + "' holds " +
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
    shards.push_back(std::move(shard));
  }
  std::set<uint64_t> made;
  for (size_t i = 0; i < req.shards.size(); ++i) {
    const proto::ShardFromFiles& s = req.shards[i];
    auto put =
        directory_.Put(s.object_id, s.shard, req.owner_client, s.dtype, s.shape,
                       {shards[i].data(), shards[i].nbytes()}, {arena_.data(), arena_.size()});
    if (!put.ok()) {
      for (uint64_t object : made) {
        if (directory_.Release(object, req.owner_client).ok()) PublishFreed(object);
      }
      return put.status().WithContext("load checkpoint '" + req.dir + "'");
    }
    made.insert(s.object_id);
    AnnouncePut(s.object_id, s.shard, req.owner_client, put->nbytes);
  }
  Send(ReplyToOf(in), proto::Ok{});
  return Status::Ok();
}

}  // namespace atl::store
