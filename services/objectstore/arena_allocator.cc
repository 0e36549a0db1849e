#include "services/objectstore/arena_allocator.h"

#include <iterator>
#include <limits>
#include <string>

namespace atl::store {

ArenaAllocator::ArenaAllocator(uint64_t capacity) : capacity_(capacity / kAlignment * kAlignment) {
  if (capacity_ > 0) AddFree(0, capacity_);
}

uint64_t ArenaAllocator::RoundUp(uint64_t bytes) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max() / kAlignment * kAlignment;
  if (bytes == 0) return kAlignment;
  if (bytes > kMax) return kMax;
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

uint64_t ArenaAllocator::largest_free_block() const {
  return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
}

Result<uint64_t> ArenaAllocator::Allocate(uint64_t bytes) {
  const uint64_t size = RoundUp(bytes);
  if (size > capacity_) {
    return OutOfMemory("cannot allocate " + std::to_string(bytes) + " bytes: the arena holds " +
                       std::to_string(capacity_) + " bytes in all, so it can never fit");
  }
  auto best = free_by_size_.lower_bound({size, 0});
  if (best == free_by_size_.end()) {
    return OutOfMemory(
        "no room for " + std::to_string(bytes) + " bytes now: " + std::to_string(free_bytes()) +
        " of " + std::to_string(capacity_) + " arena bytes are free, the largest free block is " +
        std::to_string(largest_free_block()) + " bytes");
  }
  const auto [block_size, offset] = *best;
  RemoveFree(free_by_offset_.find(offset));
  if (block_size > size) AddFree(offset + size, block_size - size);
  allocated_.emplace(offset, size);
  used_ += size;
  return offset;
}

Status ArenaAllocator::Free(uint64_t offset) {
  auto it = allocated_.find(offset);
  if (it == allocated_.end()) {
    return InvalidArgument("offset " + std::to_string(offset) +
                           " is not the start of an allocated arena block");
  }
  const uint64_t end = offset + it->second;
  used_ -= it->second;
  allocated_.erase(it);
  uint64_t start = offset;
  uint64_t size = end - offset;
  // Merge with the free block that ends where this one starts...
  auto after = free_by_offset_.lower_bound(offset);
  if (after != free_by_offset_.begin()) {
    auto before = std::prev(after);
    if (before->first + before->second == offset) {
      start = before->first;
      size += before->second;
      RemoveFree(before);
    }
  }
  // ...and with the one that starts where it ends.
  after = free_by_offset_.find(end);
  if (after != free_by_offset_.end()) {
    size += after->second;
    RemoveFree(after);
  }
  AddFree(start, size);
  return Status::Ok();
}

void ArenaAllocator::AddFree(uint64_t offset, uint64_t size) {
  free_by_offset_.emplace(offset, size);
  free_by_size_.emplace(size, offset);
}

void ArenaAllocator::RemoveFree(std::map<uint64_t, uint64_t>::iterator it) {
  free_by_size_.erase({it->second, it->first});
  free_by_offset_.erase(it);
}

}  // namespace atl::store
