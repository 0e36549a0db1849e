// The object store's side of checkpoints (docs/design-notes.md, "Checkpoints"): writing the
// shards it holds as .npy files, completing a checkpoint with its index, reading an index,
// and reading files back into new objects. The bytes go between the store's memory and its
// disk; the client sends only names and places.
//
// The loop checks a request, pins the memory the files are written from or read into, and
// hands the file work (checkpoint_files.h) to the CheckpointWorker; the reply goes out when
// that is done, so that the loop serves and heartbeats while a large checkpoint is written.
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/checkpoint/index.h"
#include "common/net/event_topics.h"
#include "common/net/request_server.h"
#include "common/proto/ids.h"
#include "services/objectstore/checkpoint_files.h"
#include "services/objectstore/store_service.h"

namespace atl::store {

// A save on the worker: the files, over the pinned shards' memory and the request's value
// frames, which it owns until the reply.
struct StoreService::SaveJob {
  ReplyTo to;
  proto::SaveShards req;
  net::Frames values;
  std::vector<NpyToWrite> files;
  std::vector<Directory::Block> pins;
};

// A load on the worker: the shards it fills, reserved (unsealed) and pinned.
struct StoreService::LoadJob {
  ReplyTo to;
  proto::LoadShards req;
  std::vector<std::span<std::byte>> targets;
  std::vector<Directory::Block> pins;
};

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

void StoreService::RejectLater(const ReplyTo& to, proto::Kind kind, const Status& error) {
  net::ReportRejection(events_, std::string(topics::kErrorStore), rejected_,
                       to.routing_id.to_string_view(), kind, error);
  rejected_.Flush();
  SendError(to, error);
}

Status StoreService::StartCheckpointWorker() {
  if (checkpoint_worker_.started()) return Status::Ok();
  ATOLL_RETURN_IF_ERROR(checkpoint_worker_.Start());
  loop_.AddFd("store.checkpoint_done", checkpoint_worker_.fd(),
              [this] { checkpoint_worker_.RunCompletions(); });
  return Status::Ok();
}

void StoreService::UnpinAll(const std::vector<Directory::Block>& pins) {
  bool freed = false;
  for (const Directory::Block& block : pins) freed |= directory_.Unpin(block);
  if (freed) RetryPending();
}

Status StoreService::OnSaveShards(proto::SaveShards req, proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(const std::string root,
                         CheckpointRootOf(in, req.owner_client, "save a checkpoint"));
  ATOLL_RETURN_IF_ERROR(StartCheckpointWorker());
  if (in.data.size() != req.values.size()) {
    return InvalidArgument("SaveShards with " + std::to_string(req.values.size()) +
                           " values needs as many data frames, got " +
                           std::to_string(in.data.size()));
  }
  // Everything is checked before the first file is written.
  auto job = std::make_shared<SaveJob>();
  std::vector<const ShardInfo*> shards;
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
    job->files.push_back(
        {s.file, info->dtype, info->shape, {arena_.data() + info->offset, info->nbytes}});
    shards.push_back(info);
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
  }
  // The worker writes from the shards' memory, pinned until it is done, and from the value
  // frames, moved into the job first (a small frame's bytes live inside it).
  for (const ShardInfo* info : shards) job->pins.push_back(directory_.Pin(*info));
  job->values = std::move(in.data);
  for (size_t i = 0; i < req.values.size(); ++i) {
    const proto::ValueFile& v = req.values[i];
    const zmq::message_t& frame = job->values[i];
    job->files.push_back(
        {v.file, v.dtype, v.shape, {static_cast<const std::byte*>(frame.data()), frame.size()}});
  }
  job->to = ReplyToOf(in);
  job->req = std::move(req);
  checkpoint_worker_.Post([this, job, root](const std::atomic<bool>& stopping) {
    auto written = WriteNpyFiles(root, job->req.dir, job->files, stopping);
    return [this, job, written = std::move(written)] { FinishSave(*job, written); };
  });
  return Status::Ok();
}

void StoreService::FinishSave(SaveJob& job, const Result<proto::SaveShardsReply>& written) {
  UnpinAll(job.pins);
  if (!written.ok()) {
    RejectLater(job.to, proto::Kind::kSaveShards, written.status());
    return;
  }
  uint64_t bytes = 0;
  for (const proto::FileWritten& f : written->files) bytes += f.bytes;
  Send(job.to, *written);
  events_.Publish(topics::kCheckpointWritten, {{"host", options_.host},
                                               {"owner", job.req.owner_client},
                                               {"dir", job.req.dir},
                                               {"files", uint64_t{written->files.size()}},
                                               {"bytes", bytes}});
}

Status StoreService::OnCommitCheckpoint(proto::CommitCheckpoint req, proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(const std::string root,
                         CheckpointRootOf(in, req.owner_client, "commit a checkpoint"));
  ATOLL_RETURN_IF_ERROR(StartCheckpointWorker());
  if (req.index.size() > kMaxIndexBytes) {
    return InvalidArgument("a checkpoint index is at most " + std::to_string(kMaxIndexBytes) +
                           " bytes");
  }
  std::set<std::string> keep;
  for (const std::string& file : req.files) {
    ATOLL_RETURN_IF_ERROR(checkpoint::CheckFileName(file));
    keep.insert(file);
  }
  auto job =
      std::make_shared<std::pair<ReplyTo, proto::CommitCheckpoint>>(ReplyToOf(in), std::move(req));
  checkpoint_worker_.Post([this, job, root, keep](const std::atomic<bool>&) {
    auto removed = CommitIndex(root, job->second.dir, job->second.index, keep);
    return [this, job, removed = std::move(removed)] {
      const auto& [to, commit] = *job;
      if (!removed.ok()) return RejectLater(to, proto::Kind::kCommitCheckpoint, removed.status());
      Send(to, proto::Ok{});
      events_.Publish(topics::kCheckpointCommitted, {{"host", options_.host},
                                                     {"owner", commit.owner_client},
                                                     {"dir", commit.dir},
                                                     {"stale_files_removed", uint64_t{*removed}}});
    };
  });
  return Status::Ok();
}

Status StoreService::OnReadCheckpointIndex(proto::ReadCheckpointIndex req, proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(const std::string root,
                         CheckpointRootOf(in, req.client, "read a checkpoint"));
  ATOLL_RETURN_IF_ERROR(StartCheckpointWorker());
  auto to = std::make_shared<ReplyTo>(ReplyToOf(in));
  checkpoint_worker_.Post([this, to, root, dir = req.dir](const std::atomic<bool>&) {
    auto text = ReadIndex(root, dir, options_.host);
    return [this, to, text = std::move(text)] {
      if (!text.ok()) return RejectLater(*to, proto::Kind::kReadCheckpointIndex, text.status());
      Send(*to, proto::CheckpointIndexText{*text});
    };
  });
  return Status::Ok();
}

Status StoreService::OnLoadShards(proto::LoadShards req, proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(const std::string root,
                         CheckpointRootOf(in, req.owner_client, "load a checkpoint"));
  ATOLL_RETURN_IF_ERROR(StartCheckpointWorker());
  for (const proto::ShardFromFiles& s : req.shards) {
    ATOLL_RETURN_IF_ERROR(CheckNewObject(in, s.object_id, req.owner_client));
    ATOLL_ASSIGN_OR_RETURN(const uint64_t nbytes, Directory::ShardBytes(s.dtype, s.shape));
    if (!directory_.CanEverFit(MemoryPools::kHost, nbytes)) {
      return OutOfMemory(ShardName(s.object_id, s.shard) + " needs " + std::to_string(nbytes) +
                         " bytes, more than host " + options_.host + "'s object-store arena holds");
    }
  }
  // The shards are reserved now, unsealed (readers wait for them), and filled by the worker.
  auto job = std::make_shared<LoadJob>();
  for (const proto::ShardFromFiles& s : req.shards) {
    auto created = directory_.Create(s.object_id, s.shard, req.owner_client, s.dtype, s.shape);
    if (!created.ok()) {
      const Status error = created.status().WithContext("load checkpoint '" + req.dir + "'");
      UndoLoad(req, job->pins.size(), job->pins, error);
      return error;
    }
    job->pins.push_back(directory_.Pin(*created));
    job->targets.emplace_back(arena_.data() + created->offset, created->nbytes);
  }
  job->to = ReplyToOf(in);
  job->req = std::move(req);
  checkpoint_worker_.Post([this, job, root](const std::atomic<bool>& stopping) {
    Status read = ReadShards(root, job->req.dir, job->req.shards, job->targets, stopping);
    return [this, job, read = std::move(read)] { FinishLoad(*job, read); };
  });
  return Status::Ok();
}

void StoreService::FinishLoad(LoadJob& job, const Status& read) {
  const proto::LoadShards& req = job.req;
  Status status = read;
  // A shard freed while it was read (its owner collected) makes the whole load fail.
  for (const proto::ShardFromFiles& s : req.shards) {
    if (!status.ok()) break;
    if (auto found = directory_.Find(s.object_id, s.shard); !found.ok()) {
      status = Cancelled(found.status().message() + " (its owner's objects were freed)");
    }
  }
  if (!status.ok()) {
    const Status error = status.WithContext("load checkpoint '" + req.dir + "'");
    UndoLoad(req, req.shards.size(), job.pins, error);
    RejectLater(job.to, proto::Kind::kLoadShards, error);
    return;
  }
  for (size_t i = 0; i < req.shards.size(); ++i) {
    const proto::ShardFromFiles& s = req.shards[i];
    (void)directory_.Seal(s.object_id, s.shard);  // found above, and only this job seals it
    AnnouncePut(s.object_id, s.shard, req.owner_client, job.targets[i].size());
  }
  UnpinAll(job.pins);
  Send(job.to, proto::Ok{});
}

void StoreService::UndoLoad(const proto::LoadShards& req, size_t reserved,
                            const std::vector<Directory::Block>& pins, const Status& error) {
  std::set<uint64_t> objects;
  for (size_t i = 0; i < reserved; ++i) {
    const proto::ShardFromFiles& s = req.shards[i];
    // Readers already waiting for a shard get why it will never be there.
    if (directory_.Seal(s.object_id, s.shard, error).ok()) WakeWaiters(s.object_id, s.shard);
    objects.insert(s.object_id);
  }
  bool freed = false;
  for (uint64_t object : objects) {
    auto released = directory_.Release(object, req.owner_client);
    if (released.ok() && *released == ReleaseOutcome::kFreed) {
      PublishFreed(object);
      freed = true;
    } else {
      FreeIfReleased(object);  // its owner released it while it was read
    }
  }
  UnpinAll(pins);
  if (freed) RetryPending();
}

}  // namespace atl::store
