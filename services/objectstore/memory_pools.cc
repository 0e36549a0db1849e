#include "services/objectstore/memory_pools.h"

namespace atl::store {

MemoryPools::MemoryPools(uint64_t arena_bytes, const std::vector<uint64_t>& device_bytes) {
  pools_.push_back({0, ArenaAllocator(arena_bytes)});
  region_bytes_ = pools_.back().allocator.capacity();
  for (uint64_t bytes : device_bytes) {
    pools_.push_back({region_bytes_, ArenaAllocator(bytes)});
    region_bytes_ += pools_.back().allocator.capacity();
  }
}

std::string MemoryPools::PoolName(int32_t pool) {
  return pool == kHost ? "the host arena" : "device " + std::to_string(pool);
}

Status MemoryPools::Check(int32_t pool) const {
  if (pool == kHost || (pool >= 0 && static_cast<size_t>(pool) < devices())) return Status::Ok();
  return InvalidArgument("device " + std::to_string(pool) + " does not exist (this host has " +
                         std::to_string(devices()) + ")");
}

bool MemoryPools::CanEverFit(int32_t pool, uint64_t bytes) const {
  return Get(pool).allocator.CanEverFit(bytes);
}

Result<uint64_t> MemoryPools::Allocate(int32_t pool, uint64_t bytes) {
  ATOLL_RETURN_IF_ERROR(Check(pool));
  Pool& p = Get(pool);
  if (!p.allocator.CanEverFit(bytes)) {
    return OutOfMemory(std::to_string(bytes) + " bytes can never fit in " + PoolName(pool) +
                       ", which holds " + std::to_string(p.allocator.capacity()) + " bytes in all");
  }
  auto offset = p.allocator.Allocate(bytes);
  if (!offset.ok()) {
    return OutOfMemory("no room for " + std::to_string(bytes) + " bytes in " + PoolName(pool) +
                       " now: " + std::to_string(p.allocator.free_bytes()) + " of " +
                       std::to_string(p.allocator.capacity()) + " bytes are free");
  }
  return p.base + *offset;
}

Status MemoryPools::Free(int32_t pool, uint64_t offset) {
  ATOLL_RETURN_IF_ERROR(Check(pool));
  Pool& p = Get(pool);
  if (offset < p.base) return InvalidArgument("offset below " + PoolName(pool));
  return p.allocator.Free(offset - p.base);
}

}  // namespace atl::store
