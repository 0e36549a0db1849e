#include "services/objectstore/arena_allocator.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>
#include "tests/status_matchers.h"

namespace atl::store {
namespace {

constexpr uint64_t kA = ArenaAllocator::kAlignment;

TEST(ArenaAllocatorTest, AlignsAndRoundsEveryBlock) {
  ArenaAllocator arena(10 * kA + 7);  // the ragged tail is unusable
  EXPECT_EQ(arena.capacity(), 10 * kA);
  auto a = arena.Allocate(1);
  auto b = arena.Allocate(kA + 1);
  auto c = arena.Allocate(0);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a % kA, 0u);
  EXPECT_EQ(*b % kA, 0u);
  EXPECT_EQ(*c % kA, 0u);
  EXPECT_NE(*a, *c);  // a zero-byte request still gets its own block
  EXPECT_EQ(arena.used_bytes(), 4 * kA);
  EXPECT_EQ(arena.allocations(), 3u);
}

TEST(ArenaAllocatorTest, NeverFitsIsOutOfMemoryNamingTheSizes) {
  ArenaAllocator arena(4 * kA);
  auto r = arena.Allocate(4 * kA + 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kOutOfMemory);
  EXPECT_NE(r.status().message().find("can never fit"), std::string::npos);
  EXPECT_NE(r.status().message().find(std::to_string(4 * kA + 1)), std::string::npos);
  EXPECT_FALSE(arena.CanEverFit(4 * kA + 1));
  EXPECT_TRUE(arena.CanEverFit(4 * kA));
  // Enormous requests do not overflow the rounding.
  EXPECT_EQ(arena.Allocate(UINT64_MAX).status().code(), Code::kOutOfMemory);
}

TEST(ArenaAllocatorTest, FullArenaIsOutOfMemoryUntilSomethingIsFreed) {
  ArenaAllocator arena(4 * kA);
  std::vector<uint64_t> blocks;
  for (int i = 0; i < 4; ++i) {
    auto r = arena.Allocate(kA);
    ASSERT_THAT(r, IsOk());
    blocks.push_back(*r);
  }
  auto full = arena.Allocate(1);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), Code::kOutOfMemory);
  EXPECT_NE(full.status().message().find("now"), std::string::npos);
  EXPECT_EQ(arena.free_bytes(), 0u);
  ASSERT_THAT(arena.Free(blocks[2]), IsOk());
  auto again = arena.Allocate(1);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(*again, blocks[2]);
}

TEST(ArenaAllocatorTest, FragmentationBlocksALargeRequestUntilNeighboursCoalesce) {
  ArenaAllocator arena(8 * kA);
  std::vector<uint64_t> b;
  for (int i = 0; i < 8; ++i) b.push_back(*arena.Allocate(kA));
  // Free every other block: half the arena is free, but no two free blocks touch.
  for (int i = 0; i < 8; i += 2) ASSERT_THAT(arena.Free(b[i]), IsOk());
  EXPECT_EQ(arena.free_bytes(), 4 * kA);
  EXPECT_EQ(arena.largest_free_block(), kA);
  EXPECT_EQ(arena.free_blocks(), 4u);
  auto big = arena.Allocate(2 * kA);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("largest free block is " + std::to_string(kA)),
            std::string::npos)
      << big.status().message();
  // Freeing b[1] joins b[0], b[1] and b[2] into one block of three.
  ASSERT_THAT(arena.Free(b[1]), IsOk());
  EXPECT_EQ(arena.free_blocks(), 3u);
  EXPECT_EQ(arena.largest_free_block(), 3 * kA);
  auto fits = arena.Allocate(2 * kA);
  ASSERT_THAT(fits, IsOk());
  EXPECT_EQ(*fits, b[0]);
}

TEST(ArenaAllocatorTest, CoalescesBackToOneBlockInAnyFreeOrder) {
  ArenaAllocator arena(64 * kA);
  std::vector<uint64_t> blocks;
  for (uint64_t i = 1; i <= 10; ++i) blocks.push_back(*arena.Allocate(i * kA - 3));
  std::mt19937 rng(7);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  for (uint64_t offset : blocks) ASSERT_THAT(arena.Free(offset), IsOk());
  EXPECT_EQ(arena.used_bytes(), 0u);
  EXPECT_EQ(arena.free_blocks(), 1u);
  EXPECT_EQ(arena.largest_free_block(), 64 * kA);
}

TEST(ArenaAllocatorTest, BestFitPicksTheSmallestHole) {
  ArenaAllocator arena(10 * kA);
  const uint64_t a = *arena.Allocate(3 * kA);  // [0,3)
  const uint64_t sep1 = *arena.Allocate(kA);   // [3,4)
  const uint64_t b = *arena.Allocate(kA);      // [4,5)
  const uint64_t sep2 = *arena.Allocate(kA);   // [5,6); [6,10) stays free
  ASSERT_THAT(arena.Free(a), IsOk());
  ASSERT_THAT(arena.Free(b), IsOk());
  // Holes of 3, 1 and 4 blocks: one block goes into the 1-block hole.
  EXPECT_EQ(*arena.Allocate(kA), b);
  // Two blocks go into the 3-block hole rather than the 4-block tail.
  EXPECT_EQ(*arena.Allocate(2 * kA), a);
  (void)sep1;
  (void)sep2;
}

TEST(ArenaAllocatorTest, FreeOfAnUnknownOffsetChangesNothing) {
  ArenaAllocator arena(4 * kA);
  const uint64_t a = *arena.Allocate(2 * kA);
  EXPECT_EQ(arena.Free(a + kA).code(), Code::kInvalidArgument);
  EXPECT_EQ(arena.Free(3 * kA).code(), Code::kInvalidArgument);
  ASSERT_THAT(arena.Free(a), IsOk());
  EXPECT_EQ(arena.Free(a).code(), Code::kInvalidArgument);  // double free
  EXPECT_EQ(arena.used_bytes(), 0u);
  EXPECT_EQ(arena.free_blocks(), 1u);
}

TEST(ArenaAllocatorTest, RandomWorkloadKeepsTheBooksBalanced) {
  ArenaAllocator arena(1024 * kA);
  std::mt19937 rng(42);
  std::vector<std::pair<uint64_t, uint64_t>> live;  // offset, rounded size
  for (int step = 0; step < 5000; ++step) {
    if (!live.empty() && (rng() % 2 == 0)) {
      const size_t i = rng() % live.size();
      ASSERT_THAT(arena.Free(live[i].first), IsOk());
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      const uint64_t bytes = rng() % (16 * kA);
      auto r = arena.Allocate(bytes);
      if (!r.ok()) {
        ASSERT_EQ(r.status().code(), Code::kOutOfMemory);
        continue;
      }
      const uint64_t size = ArenaAllocator::RoundUp(bytes);
      for (const auto& [off, sz] : live) {
        ASSERT_TRUE(*r + size <= off || off + sz <= *r) << "overlapping blocks";
      }
      live.emplace_back(*r, size);
    }
    uint64_t used = 0;
    for (const auto& [off, sz] : live) used += sz;
    ASSERT_EQ(arena.used_bytes(), used);
  }
}

}  // namespace
}  // namespace atl::store
