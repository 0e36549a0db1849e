// ArenaAllocator: hands out byte ranges of a fixed-size arena [0, capacity). Pure
// bookkeeping: it never touches the arena's memory, so it is unit-testable without one.
//
// Every block starts on a kAlignment boundary and its size is rounded up to a multiple of
// kAlignment (a 0-byte request takes one kAlignment block, so that every live allocation has
// a distinct offset). Placement is best-fit (the smallest free block that holds the request,
// lowest offset on ties); freed blocks coalesce with free neighbours at once.
//
// Not thread-safe: the object store's event loop owns it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "atoll/status.h"

namespace atl::store {

class ArenaAllocator {
 public:
  static constexpr uint64_t kAlignment = 64;

  // `capacity` bytes, rounded down to a multiple of kAlignment.
  explicit ArenaAllocator(uint64_t capacity);

  // Reserves `bytes` (rounded up, see above) and returns the block's offset. Fails with
  // OutOfMemory when the request can never fit (larger than the capacity) or when no free
  // block is large enough now; the two messages differ (see CanEverFit) and name the sizes.
  [[nodiscard]] Result<uint64_t> Allocate(uint64_t bytes);

  // Returns the block at `offset` (an offset Allocate returned and not yet freed) to the
  // free space. InvalidArgument for any other offset; nothing changes then.
  [[nodiscard]] Status Free(uint64_t offset);

  // True when a request of `bytes` fits in an empty arena, i.e. waiting may help.
  bool CanEverFit(uint64_t bytes) const { return RoundUp(bytes) <= capacity_; }

  // The size a request of `bytes` really takes; saturates at UINT64_MAX rounded down.
  static uint64_t RoundUp(uint64_t bytes);

  uint64_t capacity() const { return capacity_; }
  uint64_t used_bytes() const { return used_; }
  uint64_t free_bytes() const { return capacity_ - used_; }
  uint64_t largest_free_block() const;
  size_t free_blocks() const { return free_by_offset_.size(); }
  size_t allocations() const { return allocated_.size(); }

 private:
  void AddFree(uint64_t offset, uint64_t size);
  void RemoveFree(std::map<uint64_t, uint64_t>::iterator it);

  uint64_t capacity_;
  uint64_t used_ = 0;
  std::map<uint64_t, uint64_t> free_by_offset_;           // offset -> size; never adjacent
  std::set<std::pair<uint64_t, uint64_t>> free_by_size_;  // (size, offset), same blocks
  std::map<uint64_t, uint64_t> allocated_;                // offset -> rounded size
};

}  // namespace atl::store
