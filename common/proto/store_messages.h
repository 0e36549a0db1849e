// Messages object stores handle. See protocol.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "common/proto/message_kind.h"

namespace atl::proto {

struct StoreHello {
  static constexpr Kind kKind = Kind::kStoreHello;
  bool operator==(const StoreHello&) const = default;
  MSGPACK_DEFINE();
};

// The store's shared-memory region holds the host arena first, then each local device's
// memory; every offset the store gives is an offset into the whole region. `instance` is
// random per store process: replies that give offsets carry it, so that an executor never
// writes or reads through the region of a store that has since restarted.
struct StoreHelloReply {
  static constexpr Kind kKind = Kind::kStoreHelloReply;
  std::string arena_name;     // POSIX shared-memory name of the region, for shm_open
  uint64_t arena_bytes = 0;   // the host arena
  uint64_t region_bytes = 0;  // the whole region: the arena and every device's memory
  uint64_t instance = 0;
  bool operator==(const StoreHelloReply&) const = default;
  MSGPACK_DEFINE(arena_name, arena_bytes, region_bytes, instance);
};

// Reserves space for one shard, in the host arena or in a local device's memory; the
// caller writes the bytes through its own mapping of the region and then sends SealObject.
// Backpressure: a device shard that does not fit now is answered once it fits, in the order
// such requests came; one that can never fit is refused at once (OutOfMemory), and its
// readers get that error.
struct CreateObject {
  static constexpr Kind kKind = Kind::kCreateObject;
  static constexpr int32_t kHost = -1;
  uint64_t object_id = 0;
  uint32_t shard = 0;
  uint64_t owner_client = 0;
  DType dtype = DType::kF32;
  Shape shape;
  int32_t device = kHost;  // the local device whose memory holds it; kHost: the arena
  bool operator==(const CreateObject&) const = default;
  MSGPACK_DEFINE(object_id, shard, owner_client, dtype, shape, device);
};

struct CreateObjectReply {
  static constexpr Kind kKind = Kind::kCreateObjectReply;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  uint64_t instance = 0;  // the store's (StoreHelloReply)
  bool operator==(const CreateObjectReply&) const = default;
  MSGPACK_DEFINE(offset, nbytes, instance);
};

// Marks a created shard ready (or failed, with error_code != 0) and wakes its waiters.
struct SealObject {
  static constexpr Kind kKind = Kind::kSealObject;
  uint64_t object_id = 0;
  uint32_t shard = 0;
  int32_t error_code = 0;
  std::string error;
  bool operator==(const SealObject&) const = default;
  MSGPACK_DEFINE(object_id, shard, error_code, error);
};

// Create + copy + seal in one message, the bytes in data frame 0: for callers that do not
// map the arena (a client on another machine), and for an executor's small output, which
// then needs no reservation round trip. Into a device's memory (members only) it waits for
// room as CreateObject does, and is answered Ok once sealed.
struct PutObject {
  static constexpr Kind kKind = Kind::kPutObject;
  uint64_t object_id = 0;
  uint32_t shard = 0;
  uint64_t owner_client = 0;
  DType dtype = DType::kF32;
  Shape shape;
  int32_t device = CreateObject::kHost;
  bool operator==(const PutObject&) const = default;
  MSGPACK_DEFINE(object_id, shard, owner_client, dtype, shape, device);
};

// Waits up to timeout_ms for the shard to be sealed (0: answer at once). The reply
// carries the bytes as data frame 0 when `inline_data`, else only where they lie. `pin`
// (a member of the cluster only, i.e. the host's executor, which reads the shard in place):
// the shard's memory stays where it is, and is given to nothing else, until the reply's
// lease is dropped (UnpinObjects), even if the object is freed meanwhile.
struct GetObject {
  static constexpr Kind kKind = Kind::kGetObject;
  uint64_t object_id = 0;
  uint32_t shard = 0;
  uint32_t timeout_ms = 0;
  bool inline_data = true;
  bool pin = false;
  bool operator==(const GetObject&) const = default;
  MSGPACK_DEFINE(object_id, shard, timeout_ms, inline_data, pin);
};

struct GetObjectReply {
  static constexpr Kind kKind = Kind::kGetObjectReply;
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  uint64_t instance = 0;  // the store's (StoreHelloReply)
  uint64_t lease = 0;     // a pinned read's, for UnpinObjects; 0: not pinned
  // The shard's bytes as sealed: numbered by the store process `instance`, never reused by
  // it for other bytes (a kernel may keep what it derives from them under this number).
  uint64_t version = 0;
  bool operator==(const GetObjectReply&) const = default;
  MSGPACK_DEFINE(dtype, shape, offset, nbytes, instance, lease, version);
};

// Drops the leases of pinned reads (GetObject::pin) that the store process `instance`
// gave: a block whose object was freed meanwhile is freed at its last lease. Leases of
// another instance (a store that restarted since), or unknown, are ignored. Not answered.
struct UnpinObjects {
  static constexpr Kind kKind = Kind::kUnpinObjects;
  uint64_t instance = 0;
  std::vector<uint64_t> leases;
  bool operator==(const UnpinObjects&) const = default;
  MSGPACK_DEFINE(instance, leases);
};

// Drops one reference; the object (all its shards on this host) is freed at zero, once
// the `shards` shards the releaser knows of here (0: those the store holds) are all sealed:
// an executor may still be writing one. A release of an object not created yet (its run
// was dropped or cancelled before it ran) is remembered for `owner_client`, so that the
// object is freed once created and sealed, or when that client's objects are collected.
struct ReleaseObject {
  static constexpr Kind kKind = Kind::kReleaseObject;
  uint64_t object_id = 0;
  uint64_t owner_client = 0;  // 0: unowned; an unknown object is then NotFound
  uint32_t shards = 0;
  bool operator==(const ReleaseObject&) const = default;
  MSGPACK_DEFINE(object_id, owner_client, shards);
};

struct GetStoreStats {
  static constexpr Kind kKind = Kind::kGetStoreStats;
  bool operator==(const GetStoreStats&) const = default;
  MSGPACK_DEFINE();
};

struct StoreStats {
  static constexpr Kind kKind = Kind::kStoreStats;
  uint64_t objects = 0;
  uint64_t bytes_in_use = 0;  // of the host arena
  uint64_t arena_bytes = 0;
  std::map<uint64_t, uint64_t> objects_per_owner;
  std::vector<uint64_t> device_bytes_in_use;  // per local device
  std::vector<uint64_t> device_bytes;         // per local device: its whole memory
  // Releases of objects not created yet, by owner: none are left once every release an
  // owner sent matched an object (see ReleaseObject).
  std::map<uint64_t, uint64_t> tombstones_per_owner;
  bool operator==(const StoreStats&) const = default;
  MSGPACK_DEFINE(objects, bytes_in_use, arena_bytes, objects_per_owner, device_bytes_in_use,
                 device_bytes, tombstones_per_owner);
};

// Checkpoints (docs/design-notes.md, "Checkpoints"). Every `dir` is relative to the store's
// checkpoint root, below the sender's key name for a client key; the store refuses absolute
// paths, '..' and symbolic links. Files are written to a temporary name and renamed.

// A shard this store holds, to write as the .npy file `file`.
struct ShardFile {
  uint64_t object_id = 0;
  uint32_t shard = 0;
  std::string file;
  bool operator==(const ShardFile&) const = default;
  MSGPACK_DEFINE(object_id, shard, file);
};

// A value the client sends whole (the next data frame), to write as `file`.
struct ValueFile {
  std::string file;
  DType dtype = DType::kF32;
  Shape shape;
  bool operator==(const ValueFile&) const = default;
  MSGPACK_DEFINE(file, dtype, shape);
};

// Writes the owner's sealed shards held here and the values (data frame i for values[i])
// into `dir` (made if missing). Answered SaveShardsReply once every file is written.
struct SaveShards {
  static constexpr Kind kKind = Kind::kSaveShards;
  uint64_t owner_client = 0;
  std::string dir;
  std::vector<ShardFile> shards;
  std::vector<ValueFile> values;
  bool operator==(const SaveShards&) const = default;
  MSGPACK_DEFINE(owner_client, dir, shards, values);
};

struct FileWritten {
  std::string file;
  uint64_t bytes = 0;
  uint32_t crc32 = 0;  // of the whole file (zlib's)
  bool operator==(const FileWritten&) const = default;
  MSGPACK_DEFINE(file, bytes, crc32);
};

struct SaveShardsReply {
  static constexpr Kind kKind = Kind::kSaveShardsReply;
  std::vector<FileWritten> files;  // in request order: shards, then values
  bool operator==(const SaveShardsReply&) const = default;
  MSGPACK_DEFINE(files);
};

// Completes a checkpoint once every store wrote its files: writes `index` as index.json (the
// last file written, so a checkpoint without one is incomplete), then removes the files of
// `dir` that look like checkpoint data (.npy, temporaries) and `files` does not name (an
// earlier save's). Answered Ok.
struct CommitCheckpoint {
  static constexpr Kind kKind = Kind::kCommitCheckpoint;
  uint64_t owner_client = 0;
  std::string dir;
  std::string index;
  std::vector<std::string> files;
  bool operator==(const CommitCheckpoint&) const = default;
  MSGPACK_DEFINE(owner_client, dir, index, files);
};

// Reads `dir`'s index.json: answered CheckpointIndexText, or NotFound when there is none.
struct ReadCheckpointIndex {
  static constexpr Kind kKind = Kind::kReadCheckpointIndex;
  uint64_t client = 0;
  std::string dir;
  bool operator==(const ReadCheckpointIndex&) const = default;
  MSGPACK_DEFINE(client, dir);
};

struct CheckpointIndexText {
  static constexpr Kind kKind = Kind::kCheckpointIndexText;
  std::string index;
  bool operator==(const CheckpointIndexText&) const = default;
  MSGPACK_DEFINE(index);
};

// The block [begin, begin + size) of .npy file `file` (which must be `bytes` long with CRC-32
// `crc32` and hold a `file_shape` array), written at `at` in a shard.
struct FilePiece {
  std::string file;
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
  Shape file_shape;
  Shape begin;
  Shape size;
  Shape at;
  bool operator==(const FilePiece&) const = default;
  MSGPACK_DEFINE(file, bytes, crc32, file_shape, begin, size, at);
};

// A new shard of the owner's, in the host arena, made of pieces of files that cover it.
struct ShardFromFiles {
  uint64_t object_id = 0;
  uint32_t shard = 0;
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<FilePiece> pieces;
  bool operator==(const ShardFromFiles&) const = default;
  MSGPACK_DEFINE(object_id, shard, dtype, shape, pieces);
};

// Reads shards from `dir`'s files into new sealed objects owned by `owner_client`: all of
// them, or none (an error leaves nothing behind). Answered Ok.
struct LoadShards {
  static constexpr Kind kKind = Kind::kLoadShards;
  uint64_t owner_client = 0;
  std::string dir;
  std::vector<ShardFromFiles> shards;
  bool operator==(const LoadShards&) const = default;
  MSGPACK_DEFINE(owner_client, dir, shards);
};

}  // namespace atl::proto
