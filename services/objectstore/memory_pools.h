// MemoryPools: the memory one host's object store hands out, as pools laid end to end in
// one shared-memory region. Pool "host" is the arena for host-resident objects (arguments a
// client put); pool "device d" is local device d's memory (its budget, `device_memory_mb`),
// holding the outputs its computations wrote. A cpu device's memory is host memory, so
// backing it with the store's region lets the executor write outputs, and local clients read
// them, without a socket; a region's pages cost nothing until they are touched.
//
// Offsets are offsets into the whole region. Each pool is an ArenaAllocator of its own, so a
// device's budget is enforced exactly, and "never fits" (larger than the pool) is told apart
// from "no room now" (CanEverFit), which is what lets a computation wait instead of failing.
//
// Not thread-safe: the object store's event loop owns it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "atoll/status.h"
#include "services/objectstore/arena_allocator.h"

namespace atl::store {

class MemoryPools {
 public:
  static constexpr int32_t kHost = -1;  // the host arena; devices are 0..devices()-1

  MemoryPools(uint64_t arena_bytes, const std::vector<uint64_t>& device_bytes);

  // The size of the region that backs every pool.
  uint64_t region_bytes() const { return region_bytes_; }
  size_t devices() const { return pools_.size() - 1; }

  // "the host arena" or "device 2".
  static std::string PoolName(int32_t pool);
  // InvalidArgument unless `pool` is kHost or a local device.
  [[nodiscard]] Status Check(int32_t pool) const;

  // A block of `bytes` in `pool`, as a region offset. OutOfMemory when it can never fit
  // (CanEverFit) or when there is no room now; the messages say which, with the sizes.
  [[nodiscard]] Result<uint64_t> Allocate(int32_t pool, uint64_t bytes);
  [[nodiscard]] Status Free(int32_t pool, uint64_t offset);
  bool CanEverFit(int32_t pool, uint64_t bytes) const;

  uint64_t used_bytes(int32_t pool) const { return Get(pool).allocator.used_bytes(); }
  uint64_t capacity(int32_t pool) const { return Get(pool).allocator.capacity(); }

 private:
  struct Pool {
    uint64_t base = 0;  // where the pool starts in the region
    ArenaAllocator allocator;
  };
  const Pool& Get(int32_t pool) const { return pools_[static_cast<size_t>(pool + 1)]; }
  Pool& Get(int32_t pool) { return pools_[static_cast<size_t>(pool + 1)]; }

  std::vector<Pool> pools_;  // [0] the host arena, [d + 1] device d
  uint64_t region_bytes_ = 0;
};

}  // namespace atl::store
