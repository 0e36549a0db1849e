#include "services/objectstore/room_queue.h"

#include <utility>

#include <fmt/format.h>

namespace atl::store {

Result<RoomQueue::Admitted> RoomQueue::Admit(ReplyTo to, const proto::CreateObject& request,
                                             std::optional<std::span<const std::byte>> put) {
  const proto::CreateObject& r = request;
  Admitted admitted;
  ATOLL_ASSIGN_OR_RETURN(admitted.nbytes, Directory::ShardBytes(r.dtype, r.shape));
  ATOLL_RETURN_IF_ERROR(directory_.pools().Check(r.device));
  auto create = [&]() -> Result<ShardInfo> {
    return directory_.Create(r.object_id, r.shard, r.owner_client, r.dtype, r.shape, r.device);
  };
  if (r.device == proto::CreateObject::kHost) {
    ATOLL_ASSIGN_OR_RETURN(admitted.created, create());
    admitted.to = std::move(to);
    return admitted;
  }
  if (!directory_.CanEverFit(r.device, admitted.nbytes)) {
    admitted.refusal = OutOfMemory(
        ShardName(r.object_id, r.shard) + " needs " + std::to_string(admitted.nbytes) +
        " bytes but " + MemoryPools::PoolName(r.device) + " of host " + host_ + " has " +
        std::to_string(directory_.pools().capacity(r.device)) + " bytes in all: it can never fit");
  } else {
    admitted.refusal = directory_.CheckQuota(r.owner_client, r.object_id, admitted.nbytes);
  }
  if (!admitted.refusal.ok()) {
    admitted.outcome = Outcome::kRefused;
    admitted.to = std::move(to);
    return admitted;
  }
  if (!Queued(r.device)) {
    Result<ShardInfo> created = create();
    if (created.ok()) {
      admitted.created = std::move(*created);
      admitted.to = std::move(to);
      return admitted;
    }
    if (created.status().code() != Code::kOutOfMemory) return created.status();
  }
  admitted.outcome = Outcome::kQueued;
  admitted.ahead = Enqueue(std::move(to), request, put);
  return admitted;
}

bool RoomQueue::Queued(int32_t device) const {
  auto it = queues_.find(device);
  return it != queues_.end() && !it->second.empty();
}

size_t RoomQueue::Enqueue(ReplyTo to, proto::CreateObject request,
                          std::optional<std::span<const std::byte>> put) {
  auto& queue = queues_[request.device];
  const size_t ahead = queue.size();
  std::optional<std::vector<std::byte>> held;
  if (put) held.emplace(put->begin(), put->end());
  queue.push_back({std::move(to), std::move(request), std::move(held)});
  return ahead;
}

std::optional<RoomQueue::Ready> RoomQueue::TakeReady() {
  // From the first device each time: the store answers each request taken before it takes
  // the next, and that answer may have freed memory of a device passed over already.
  for (auto& [device, queue] : queues_) {
    if (queue.empty()) continue;
    const proto::CreateObject& req = queue.front().request;
    Result<ShardInfo> created = directory_.Create(req.object_id, req.shard, req.owner_client,
                                                  req.dtype, req.shape, req.device);
    if (!created.ok() && created.status().code() == Code::kOutOfMemory) continue;  // still full
    Ready ready{std::move(queue.front()), std::move(created)};
    queue.pop_front();
    return ready;
  }
  return std::nullopt;
}

std::vector<RoomQueue::Pending> RoomQueue::TakeClient(uint64_t client) {
  std::vector<Pending> taken;
  for (auto& [device, queue] : queues_) {
    for (auto it = queue.begin(); it != queue.end();) {
      if (it->request.owner_client != client) {
        ++it;
        continue;
      }
      taken.push_back(std::move(*it));
      it = queue.erase(it);
    }
  }
  return taken;
}

std::vector<RoomQueue::Pending> RoomQueue::TakeAll() {
  std::vector<Pending> taken;
  for (auto& [device, queue] : queues_) {
    for (Pending& pending : queue) taken.push_back(std::move(pending));
    queue.clear();
  }
  return taken;
}

std::string RoomQueue::DescribeWait(uint64_t object, uint32_t shard) const {
  const MemoryPools& pools = directory_.pools();
  auto use = [&](int32_t pool) {
    return fmt::format("{} of {} bytes held by objects not released yet", pools.used_bytes(pool),
                       pools.capacity(pool));
  };
  constexpr const char* kRemedy =
      "; release what is no longer needed, or give the store more memory";
  for (const auto& [pool, queue] : queues_) {
    for (size_t ahead = 0; ahead < queue.size(); ++ahead) {
      const proto::CreateObject& req = queue[ahead].request;
      if (req.object_id == object && req.shard == shard) {
        return fmt::format(
            ": its producer's output waits for room in {} ({}, {} more requests "
            "queued ahead of it){}",
            MemoryPools::PoolName(pool), use(pool), ahead, kRemedy);
      }
    }
  }
  // Its producer's request may not have come yet, held up by the same shortage.
  for (const auto& [pool, queue] : queues_) {
    if (queue.empty()) continue;
    return fmt::format(
        ": {} has no room now ({}, {} requests waiting for it), which may hold up "
        "its producer{}",
        MemoryPools::PoolName(pool), use(pool), queue.size(), kRemedy);
  }
  return "";
}

size_t RoomQueue::size() const {
  size_t n = 0;
  for (const auto& [device, queue] : queues_) n += queue.size();
  return n;
}

}  // namespace atl::store
