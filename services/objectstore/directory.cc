#include "services/objectstore/directory.h"

#include <cassert>
#include <cstring>
#include <string>
#include <utility>

namespace atl::store {

namespace {

std::string ObjectName(uint64_t object) { return "object " + std::to_string(object); }

}  // namespace

std::string ShardName(uint64_t object, uint32_t shard) {
  return ObjectName(object) + " shard " + std::to_string(shard);
}

std::string_view CollectReasonName(CollectReason reason) {
  switch (reason) {
    case CollectReason::kGoodbye:
      return "goodbye";
    case CollectReason::kLapsed:
      return "heartbeat lapsed";
  }
  return "?";
}

Directory::Directory(uint64_t arena_bytes, std::chrono::milliseconds client_timeout,
                     const Clock& clock, const std::vector<uint64_t>& device_bytes,
                     StoreQuota quota)
    : clock_(clock),
      pools_(arena_bytes, device_bytes),
      usage_(std::move(quota)),
      clients_heard_(client_timeout) {}

Result<uint64_t> Directory::ShardBytes(DType dtype, const Shape& shape) {
  return CheckedNumBytes(dtype, shape);
}

Status Directory::CheckNewShard(uint64_t object, uint32_t shard, uint64_t owner) const {
  auto existing = objects_.find(object);
  if (existing != objects_.end()) {
    if (existing->second.owner != owner) {
      return InvalidArgument(ObjectName(object) + " is owned by client " +
                             std::to_string(existing->second.owner) + ", not client " +
                             std::to_string(owner));
    }
    if (existing->second.shards.count(shard) != 0) {
      return FailedPrecondition(ShardName(object, shard) + " already exists");
    }
  }
  if (owner != 0 && departed_.count(owner) != 0) {
    return Cancelled("client " + std::to_string(owner) + " said goodbye; " +
                     ShardName(object, shard) + " would have no owner");
  }
  return Status::Ok();
}

bool Directory::HoldsMemory(uint64_t object) const {
  auto it = objects_.find(object);
  if (it == objects_.end()) return false;
  for (const auto& [index, shard] : it->second.shards) {
    if (shard.allocated) return true;
  }
  return false;
}

Status Directory::CheckQuota(uint64_t owner, uint64_t object, uint64_t nbytes) const {
  return usage_.Check(owner, !HoldsMemory(object), nbytes);
}

void Directory::AddShard(uint64_t object, uint32_t shard, uint64_t owner, ShardInfo info) {
  if (owner != 0 && !clients_heard_.Tracks(owner)) clients_heard_.Heard(owner, clock_.Now());
  if (info.allocated) usage_.Add(owner, !HoldsMemory(object), info.nbytes);
  const bool is_new = objects_.count(object) == 0;
  Object& entry = objects_[object];  // a new object starts with refcount 1
  entry.owner = owner;
  auto tombstone = tombstones_.find(object);
  if (is_new && tombstone != tombstones_.end() && tombstone->second.owner == owner) {
    // Released before it was made: it goes once its shards are sealed.
    entry.refcount = 0;
    entry.shards_expected = tombstone->second.shards;
    auto& owned = tombstones_by_owner_[owner];
    owned.erase(object);
    if (owned.empty()) tombstones_by_owner_.erase(owner);
    tombstones_.erase(tombstone);
  }
  objects_by_owner_[owner].insert(object);
  entry.shards.emplace(shard, std::move(info));
}

Result<ShardInfo> Directory::Create(uint64_t object, uint32_t shard, uint64_t owner, DType dtype,
                                    const Shape& shape, int32_t pool) {
  ATOLL_ASSIGN_OR_RETURN(const uint64_t nbytes, ShardBytes(dtype, shape));
  ATOLL_RETURN_IF_ERROR(pools_.Check(pool));
  ATOLL_RETURN_IF_ERROR(CheckNewShard(object, shard, owner));
  ATOLL_RETURN_IF_ERROR(CheckQuota(owner, object, nbytes));
  auto offset = pools_.Allocate(pool, nbytes);
  if (!offset.ok()) return offset.status().WithContext(ShardName(object, shard));
  ShardInfo info{dtype,       shape, pool, *offset, nbytes, /*sealed=*/false, /*allocated=*/true,
                 Status::Ok()};
  AddShard(object, shard, owner, info);
  return info;
}

Status Directory::Reject(uint64_t object, uint32_t shard, uint64_t owner, DType dtype,
                         const Shape& shape, Status error) {
  ATOLL_RETURN_IF_ERROR(CheckNewShard(object, shard, owner));
  ShardInfo info{dtype,
                 shape,
                 MemoryPools::kHost,
                 0,
                 0,
                 /*sealed=*/true,
                 /*allocated=*/false,
                 std::move(error)};
  AddShard(object, shard, owner, std::move(info));
  return Status::Ok();
}

ShardInfo* Directory::FindMutable(uint64_t object, uint32_t shard) {
  auto it = objects_.find(object);
  if (it == objects_.end()) return nullptr;
  auto s = it->second.shards.find(shard);
  return s == it->second.shards.end() ? nullptr : &s->second;
}

Result<const ShardInfo*> Directory::Find(uint64_t object, uint32_t shard) const {
  auto it = objects_.find(object);
  if (it == objects_.end()) return NotFound(ShardName(object, shard) + " is unknown");
  auto s = it->second.shards.find(shard);
  if (s == it->second.shards.end()) return NotFound(ShardName(object, shard) + " is unknown");
  return &s->second;
}

Status Directory::Seal(uint64_t object, uint32_t shard, Status error) {
  ATOLL_ASSIGN_OR_RETURN(const ShardInfo* found, Find(object, shard));
  if (found->sealed) return FailedPrecondition(ShardName(object, shard) + " is already sealed");
  ShardInfo* info = FindMutable(object, shard);
  info->sealed = true;
  info->error = std::move(error);
  info->version = ++seals_;
  return Status::Ok();
}

std::vector<std::pair<uint64_t, uint32_t>> Directory::FailUnsealedDeviceShards(
    const Status& error) {
  std::vector<std::pair<uint64_t, uint32_t>> failed;
  for (auto& [id, object] : objects_) {
    for (auto& [shard, info] : object.shards) {
      if (info.sealed || info.pool == MemoryPools::kHost) continue;
      info.sealed = true;
      info.error = error;
      info.version = ++seals_;
      failed.emplace_back(id, shard);
    }
  }
  return failed;
}

Result<ShardInfo> Directory::Put(uint64_t object, uint32_t shard, uint64_t owner, DType dtype,
                                 const Shape& shape, std::span<const std::byte> bytes,
                                 std::span<std::byte> arena) {
  ATOLL_ASSIGN_OR_RETURN(const uint64_t nbytes, ShardBytes(dtype, shape));
  if (bytes.size() != nbytes) {
    return InvalidArgument(ShardName(object, shard) + ": " + std::to_string(bytes.size()) +
                           " data bytes do not match " + std::string(DTypeName(dtype)) +
                           ShapeString(shape) + " (" + std::to_string(nbytes) + " bytes)");
  }
  if (arena.size() < pools_.region_bytes()) {
    return Internal("the arena span (" + std::to_string(arena.size()) +
                    " bytes) is smaller than the store's region");
  }
  ATOLL_ASSIGN_OR_RETURN(ShardInfo info, Create(object, shard, owner, dtype, shape));
  if (nbytes > 0) std::memcpy(arena.data() + info.offset, bytes.data(), nbytes);
  ATOLL_RETURN_IF_ERROR(Seal(object, shard));
  return *FindMutable(object, shard);
}

Result<ReleaseOutcome> Directory::Release(uint64_t object, uint64_t owner, uint32_t shards) {
  auto it = objects_.find(object);
  if (it == objects_.end()) {
    if (owner == 0) {
      return NotFound(ObjectName(object) + " is unknown (never created, or already freed)");
    }
    if (tombstones_.count(object) != 0) {
      return FailedPrecondition(ObjectName(object) + " was released already");
    }
    // Bounded by the owner's lifetime: a client never seen here is timed from now.
    if (!clients_heard_.Tracks(owner)) clients_heard_.Heard(owner, clock_.Now());
    tombstones_[object] = {owner, shards};
    tombstones_by_owner_[owner].insert(object);
    return ReleaseOutcome::kRemembered;
  }
  Object& entry = it->second;
  if (entry.refcount == 0) {
    return FailedPrecondition(ObjectName(object) + " was released already");
  }
  if (--entry.refcount > 0) return ReleaseOutcome::kHeld;
  entry.shards_expected = shards;
  return FreeIfReleased(object) ? ReleaseOutcome::kFreed : ReleaseOutcome::kFreedOnSeal;
}

bool Directory::AllSealed(const Object& object) {
  if (object.shards.size() < object.shards_expected) return false;
  for (const auto& [index, shard] : object.shards) {
    if (!shard.sealed) return false;
  }
  return true;
}

bool Directory::FreeIfReleased(uint64_t object) {
  auto it = objects_.find(object);
  if (it == objects_.end() || it->second.refcount > 0 || !AllSealed(it->second)) return false;
  FreeObject(it);
  return true;
}

void Directory::FreeObject(std::map<uint64_t, Object>::iterator it) {
  bool held = false;
  uint64_t bytes = 0;
  for (const auto& [index, shard] : it->second.shards) {
    if (!shard.allocated) continue;
    if (const Block block{shard.pool, shard.offset}; pins_.count(block) != 0) {
      freed_while_pinned_.insert(block);  // still read or written: freed at its last Unpin
    } else {
      [[maybe_unused]] const Status freed = pools_.Free(shard.pool, shard.offset);
      assert(freed.ok() && "a shard's block was not allocated");
    }
    held = true;
    bytes += shard.nbytes;
  }
  if (held) usage_.Remove(it->second.owner, bytes);
  auto owned = objects_by_owner_.find(it->second.owner);
  if (owned != objects_by_owner_.end()) {
    owned->second.erase(it->first);
    if (owned->second.empty()) objects_by_owner_.erase(owned);
  }
  objects_.erase(it);
}

Directory::Block Directory::Pin(const ShardInfo& info) {
  assert(info.allocated && "only a shard holding memory is pinned");
  const Block block{info.pool, info.offset};
  ++pins_[block];
  return block;
}

bool Directory::Unpin(Block block) {
  auto pin = pins_.find(block);
  assert(pin != pins_.end() && "Unpin without Pin");
  if (pin == pins_.end() || --pin->second > 0) return false;
  pins_.erase(pin);
  if (freed_while_pinned_.erase(block) == 0) return false;
  [[maybe_unused]] const Status freed = pools_.Free(block.pool, block.offset);
  assert(freed.ok() && "a pinned block was not allocated");
  return true;
}

std::vector<uint64_t> Directory::FreeOwnedBy(uint64_t client) {
  std::vector<uint64_t> freed;
  ForgetTombstones(client);
  auto owned = objects_by_owner_.find(client);
  if (owned == objects_by_owner_.end()) return freed;
  freed.assign(owned->second.begin(), owned->second.end());
  for (uint64_t object : freed) FreeObject(objects_.find(object));
  return freed;
}

void Directory::ForgetTombstones(uint64_t client) {
  auto owned = tombstones_by_owner_.find(client);
  if (owned == tombstones_by_owner_.end()) return;
  for (uint64_t object : owned->second) tombstones_.erase(object);
  tombstones_by_owner_.erase(owned);
}

void Directory::Heartbeat(uint64_t client) {
  if (client == 0) return;
  clients_heard_.Heard(client, clock_.Now());
  departed_.erase(client);
}

Collected Directory::Goodbye(uint64_t client) {
  Collected out{client, CollectReason::kGoodbye, {}};
  if (client == 0) return out;
  out.objects = FreeOwnedBy(client);
  clients_heard_.Heard(client, clock_.Now());
  departed_.insert(client);
  return out;
}

std::vector<Collected> Directory::Expire() {
  std::vector<Collected> out;
  for (uint64_t client : clients_heard_.TakeSilent(clock_.Now())) {
    if (auto collected = Collect(client)) out.push_back(std::move(*collected));
  }
  return out;
}

std::optional<Collected> Directory::Collect(uint64_t client) {
  std::optional<Collected> out;
  if (departed_.erase(client) == 0) out = {client, CollectReason::kLapsed, FreeOwnedBy(client)};
  ForgetTombstones(client);  // releases that came after its goodbye
  return out;
}

void Directory::FollowClientTable(std::chrono::milliseconds late) {
  clients_heard_.FollowTable(late, clock_.Now());
}

void Directory::ClientTableHeard(const std::vector<uint64_t>& alive) {
  clients_heard_.TableHeard(alive, clock_.Now());
}

std::optional<Collected> Directory::Left(uint64_t client) {
  if (!clients_heard_.Tracks(client)) return std::nullopt;
  clients_heard_.Forget(client);
  return Collect(client);
}

DirectoryStats Directory::Stats() const {
  DirectoryStats stats;
  stats.objects = objects_.size();
  stats.tombstones = tombstones_.size();
  for (const auto& [id, object] : objects_) stats.shards += object.shards.size();
  stats.bytes_in_use = pools_.used_bytes(MemoryPools::kHost);
  stats.arena_bytes = pools_.capacity(MemoryPools::kHost);
  for (int32_t d = 0; d < static_cast<int32_t>(pools_.devices()); ++d) {
    stats.device_bytes_in_use.push_back(pools_.used_bytes(d));
    stats.device_bytes.push_back(pools_.capacity(d));
  }
  stats.clients = clients_heard_.size() - departed_.size();
  for (const auto& [owner, objects] : objects_by_owner_) {
    stats.objects_per_owner[owner] = objects.size();
  }
  for (const auto& [owner, objects] : tombstones_by_owner_) {
    stats.tombstones_per_owner[owner] = objects.size();
  }
  return stats;
}

}  // namespace atl::store
