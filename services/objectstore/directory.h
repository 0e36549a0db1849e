// Directory: the object store's record of every object on its host: where each shard lies
// (the host arena or a device's memory, see memory_pools.h), whether it is sealed, who owns it, how
// many references are left, and which clients are alive. Pure logic: it assigns arena offsets
// through an ArenaAllocator but never touches the arena except to copy a Put's bytes into the span
// it is given; time comes from an injected Clock.
//
// Objects. An object is one logical (sharded) buffer, keyed by a client-made 64-bit id; the
// shards held on this host are keyed by shard index. The first Create or Put of any shard
// creates the object with one reference, held by its owner; later shards join it and must
// name the same owner. Release drops a reference; at zero every shard is freed at once.
//
// Releases. The object's last reference may be dropped while an executor still writes one of
// its shards (its run was cancelled or its Run handle dropped): then it is freed only once
// the shards the releaser knows of here are all sealed, so that no write lands in memory
// given to another object. A release of an object not created yet, for an owner, is kept as
// a tombstone: the object's shards are then freed as soon as they are all created and
// sealed; the tombstone is forgotten with the owner's objects. A release of an object that
// never existed and never will is indistinguishable from that, so it too is remembered
// until its owner goes, not reported; a release of an object already released and not
// freed yet is FailedPrecondition.
//
// Owners and liveness. Owner 0 means "no owner": such an object lives until released. Any
// other owner is a client, first seen when it heartbeats or when an object it owns is first
// created (creating does not count as a heartbeat afterwards). A client whose last sign of
// life is more than `client_timeout` old, or which said Goodbye, loses all its objects. After
// Goodbye, creating objects for that client is refused (Cancelled) until `client_timeout`
// has passed, so that late outputs of its programs do not leak.
//
// Pins. A checkpoint is written from a shard's memory, or read into it, on another thread
// than the loop's (CheckpointWorker). A pinned block outlives its object: freeing the object
// (a release, a collection) leaves its memory allocated until the last pin on it goes, so
// that no other object is given that memory while it is being read or written.
//
// Quotas. What each owner holds here (objects with memory, their bytes) is counted
// (OwnerUsage) as shards are created and objects freed, collections included; Create refuses
// a shard that would take its owner over its quota (ResourceExhausted) before it looks for
// memory, so a request over quota never waits for room either.
//
// Not thread-safe: the object store's event loop owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/service/client_liveness.h"
#include "services/objectstore/clock.h"
#include "services/objectstore/memory_pools.h"
#include "services/objectstore/owner_usage.h"

namespace atl::store {

struct ShardInfo {
  DType dtype = DType::kF32;
  Shape shape;
  int32_t pool = MemoryPools::kHost;  // the host arena, or the local device holding it
  uint64_t offset = 0;                // in the store's region
  uint64_t nbytes = 0;                // dtype size * elements; the block may be larger (aligned)
  bool sealed = false;
  bool allocated = true;  // false for a shard refused because it can never fit (Reject)
  Status error;           // for a sealed shard: not OK when its producer failed; readers get it
  // Numbers the sealed bytes (from 1, in sealing order, never reused by this directory), so
  // that a reader may keep what it derives from them (GetObjectReply::version).
  uint64_t version = 0;
};

// "object N shard S", for messages.
std::string ShardName(uint64_t object, uint32_t shard);

enum class CollectReason { kGoodbye, kLapsed };
std::string_view CollectReasonName(CollectReason reason);  // "goodbye", "heartbeat lapsed"

// One client whose objects were freed because it left or went silent.
struct Collected {
  uint64_t client = 0;
  CollectReason reason = CollectReason::kLapsed;
  std::vector<uint64_t> objects;  // ids freed, ascending
};

// What a Release did.
enum class ReleaseOutcome {
  kHeld,         // other references remain
  kFreed,        // freed now
  kFreedOnSeal,  // the last reference, but a shard is still being written: freed once sealed
  kRemembered,   // not created yet: freed once it is (a tombstone)
};

struct DirectoryStats {
  uint64_t objects = 0;
  uint64_t tombstones = 0;  // releases of objects not created yet
  uint64_t shards = 0;
  uint64_t bytes_in_use = 0;  // arena bytes reserved, alignment included
  uint64_t arena_bytes = 0;
  std::vector<uint64_t> device_bytes_in_use;       // per local device, alignment included
  std::vector<uint64_t> device_bytes;              // per local device: its whole memory
  uint64_t clients = 0;                            // clients known alive
  std::map<uint64_t, uint64_t> objects_per_owner;  // owner 0: unowned objects
  std::map<uint64_t, uint64_t> tombstones_per_owner;
};

class Directory {
 public:
  // `arena_bytes`: the arena's size. `client_timeout`: silence after which a client's
  // objects are collected (heartbeat period * liveness). `clock` must outlive the directory.
  // `device_bytes`: the memory of each local device, for device-resident shards.
  // `quota`: what each owner may hold here (OwnerUsage; none by default).
  Directory(uint64_t arena_bytes, std::chrono::milliseconds client_timeout, const Clock& clock,
            const std::vector<uint64_t>& device_bytes = {}, StoreQuota quota = {});

  // Bytes a shard of `dtype` and `shape` takes: InvalidArgument for an unknown dtype, a
  // negative dimension or a size that does not fit in int64 (CheckedNumBytes).
  [[nodiscard]] static Result<uint64_t> ShardBytes(DType dtype, const Shape& shape);

  // Reserves space in `pool` (the host arena or a local device) for an unsealed shard.
  // Errors: InvalidArgument (bad dtype, shape or pool, or the object exists with another
  // owner), FailedPrecondition (this shard exists), Cancelled (the owner said goodbye),
  // ResourceExhausted (over the owner's quota here, whatever the memory: CheckQuota),
  // OutOfMemory (never fits, or no room now; CanEverFit tells which, the message names the
  // sizes). Nothing changes on error.
  [[nodiscard]] Result<ShardInfo> Create(uint64_t object, uint32_t shard, uint64_t owner,
                                         DType dtype, const Shape& shape,
                                         int32_t pool = MemoryPools::kHost);

  // Records a shard that was refused for good (`error`, e.g. it can never fit): sealed with
  // the error and holding no memory, so that its readers fail at once instead of waiting.
  // Errors as Create, except OutOfMemory.
  [[nodiscard]] Status Reject(uint64_t object, uint32_t shard, uint64_t owner, DType dtype,
                              const Shape& shape, Status error);

  // OK when `owner` may reserve `nbytes` more for `object` here within its quota (a first
  // shard holding memory makes the object count); ResourceExhausted otherwise.
  [[nodiscard]] Status CheckQuota(uint64_t owner, uint64_t object, uint64_t nbytes) const;
  // What `owner` holds here, as its quota counts it.
  OwnerUsage::Use UsageOf(uint64_t owner) const { return usage_.Of(owner); }

  // True when a shard of `nbytes` fits in `pool` once enough else is freed.
  bool CanEverFit(int32_t pool, uint64_t nbytes) const { return pools_.CanEverFit(pool, nbytes); }

  // Marks a created shard sealed; `error` not OK records a failed producer. NotFound for an
  // unknown object or shard, FailedPrecondition when it is already sealed.
  [[nodiscard]] Status Seal(uint64_t object, uint32_t shard, Status error = Status::Ok());

  // Seals every unsealed shard held in a device's memory with `error`: the host's executor,
  // which reserved them, is gone and will never write them. Returns their (object, shard).
  std::vector<std::pair<uint64_t, uint32_t>> FailUnsealedDeviceShards(const Status& error);

  // Create + copy `bytes` into `arena` (the whole arena, at least arena_bytes long) + Seal.
  // InvalidArgument when bytes.size() does not match dtype and shape; otherwise as Create.
  [[nodiscard]] Result<ShardInfo> Put(uint64_t object, uint32_t shard, uint64_t owner, DType dtype,
                                      const Shape& shape, std::span<const std::byte> bytes,
                                      std::span<std::byte> arena);

  // The shard's record, sealed or not. NotFound ("object N is unknown" or "object N shard S
  // is unknown"). The pointer is valid until the next call that changes the directory.
  [[nodiscard]] Result<const ShardInfo*> Find(uint64_t object, uint32_t shard) const;

  // Drops one reference (see "Releases" above). `shards`: how many of the object's shards
  // the releaser knows this host holds (0: those it holds now). `owner`: whose object it is,
  // for a tombstone; an unknown object of owner 0 is NotFound. FailedPrecondition for an
  // object released already and not freed yet.
  [[nodiscard]] Result<ReleaseOutcome> Release(uint64_t object, uint64_t owner = 0,
                                               uint32_t shards = 0);
  // Frees `object` if its last reference was dropped and every shard it waited for is
  // sealed now; returns whether it did. Call it after a shard of it was sealed and its
  // waiters answered.
  bool FreeIfReleased(uint64_t object);

  // Records a sign of life from `client` (0 is ignored). A client that said goodbye is
  // alive again from here on.
  void Heartbeat(uint64_t client);

  // Frees every object `client` owns and refuses new ones for a while (see above).
  Collected Goodbye(uint64_t client);

  // Frees the objects of every client silent for longer than the timeout and forgets it;
  // forgets goodbyes older than the timeout. Call it periodically (every heartbeat).
  std::vector<Collected> Expire();

  // Clients heartbeat the RM alone, which tells its table of live clients each heartbeat
  // period (ClientLiveness::FollowTable): a store with an RM follows it from now on, judging
  // nobody while the table is `late`, and hears each client the table lists.
  void FollowClientTable(std::chrono::milliseconds late);
  void ClientTableHeard(const std::vector<uint64_t>& alive);
  // The RM dropped `client` (its heartbeat lapsed, or it said goodbye there first): its
  // objects are collected now, as a lapse would (nothing if it said goodbye here).
  std::optional<Collected> Left(uint64_t client);

  // A shard's memory, as pinned.
  struct Block {
    int32_t pool = MemoryPools::kHost;
    uint64_t offset = 0;
    auto operator<=>(const Block&) const = default;
  };
  // Pins the memory of `info` (a shard of this directory's, allocated) until Unpin.
  Block Pin(const ShardInfo& info);
  // Drops a pin; returns true when that freed the block (its object went while it was
  // pinned): there is room now for what waits for it.
  bool Unpin(Block block);

  DirectoryStats Stats() const;
  const MemoryPools& pools() const { return pools_; }

 private:
  struct Object {
    uint64_t owner = 0;
    uint32_t refcount = 1;
    std::map<uint32_t, ShardInfo> shards;
    // At refcount 0: how many shards must be sealed here before it is freed (0: those here).
    uint32_t shards_expected = 0;
  };
  struct Tombstone {
    uint64_t owner = 0;
    uint32_t shards = 0;
  };
  void FreeObject(std::map<uint64_t, Object>::iterator it);
  std::vector<uint64_t> FreeOwnedBy(uint64_t client);
  void ForgetTombstones(uint64_t client);
  // Frees what `client` owns and forgets its tombstones, unless it said goodbye (then
  // nothing was left to free): the end of a client no longer tracked.
  std::optional<Collected> Collect(uint64_t client);
  // True once a released object has every shard it waited for, sealed.
  static bool AllSealed(const Object& object);
  ShardInfo* FindMutable(uint64_t object, uint32_t shard);
  // True when a shard of `object` holds memory here.
  bool HoldsMemory(uint64_t object) const;
  // Checks that `owner` may add `shard` to `object` (see Create's errors).
  Status CheckNewShard(uint64_t object, uint32_t shard, uint64_t owner) const;
  void AddShard(uint64_t object, uint32_t shard, uint64_t owner, ShardInfo info);

  const Clock& clock_;
  MemoryPools pools_;
  OwnerUsage usage_;
  std::map<uint64_t, Object> objects_;
  std::map<uint64_t, std::set<uint64_t>> objects_by_owner_;  // owner -> object ids
  // The clients heard from (a heartbeat, an object or a release of theirs), and which of
  // them said goodbye: a departed client's entry is kept for its lapse, so that what comes
  // after its goodbye (a release in flight) is recognised, then dropped with it.
  ClientLiveness clients_heard_;
  std::set<uint64_t> departed_;
  uint64_t seals_ = 0;                        // the last ShardInfo::version given
  std::map<Block, uint32_t> pins_;            // pinned blocks, with their pin counts
  std::set<Block> freed_while_pinned_;        // blocks of freed objects, freed at their last Unpin
  std::map<uint64_t, Tombstone> tombstones_;  // by object
  std::map<uint64_t, std::set<uint64_t>> tombstones_by_owner_;  // owner -> object ids
};

}  // namespace atl::store
