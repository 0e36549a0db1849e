#include "services/objectstore/directory.h"
#include "tests/services/objectstore/fake_clock.h"

#include <cstring>
#include <optional>
#include <vector>

#include <gtest/gtest.h>
#include "tests/status_matchers.h"

namespace atl::store {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kArena = 64 * 1024;
constexpr milliseconds kClientTimeout{200};

class DirectoryTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  Directory dir_{kArena, kClientTimeout, clock_};
  std::vector<std::byte> arena_ = std::vector<std::byte>(kArena);
};

TEST_F(DirectoryTest, CreateSealFind) {
  auto created = dir_.Create(1, 0, /*owner=*/7, DType::kF32, {2, 3});
  ASSERT_THAT(created, IsOk());
  EXPECT_EQ(created->nbytes, 24u);
  EXPECT_FALSE(created->sealed);
  auto found = dir_.Find(1, 0);
  ASSERT_THAT(found, IsOk());
  EXPECT_FALSE((*found)->sealed);
  ASSERT_THAT(dir_.Seal(1, 0), IsOk());
  found = dir_.Find(1, 0);
  ASSERT_THAT(found, IsOk());
  EXPECT_TRUE((*found)->sealed);
  EXPECT_THAT((*found)->error, IsOk());
  EXPECT_EQ((*found)->shape, (Shape{2, 3}));
  EXPECT_EQ(dir_.Seal(1, 0).code(), Code::kFailedPrecondition);
  EXPECT_EQ(dir_.Seal(1, 1).code(), Code::kNotFound);
  EXPECT_EQ(dir_.Seal(2, 0).code(), Code::kNotFound);
  EXPECT_EQ(dir_.Find(1, 1).status().code(), Code::kNotFound);
  EXPECT_NE(dir_.Find(9, 2).status().message().find("object 9 shard 2"), std::string::npos);
}

TEST_F(DirectoryTest, SealWithErrorKeepsTheError) {
  ASSERT_THAT(dir_.Create(1, 0, 0, DType::kI32, {4}), IsOk());
  ASSERT_THAT(dir_.Seal(1, 0, Internal("kernel crashed")), IsOk());
  auto found = dir_.Find(1, 0);
  ASSERT_THAT(found, IsOk());
  EXPECT_TRUE((*found)->sealed);
  EXPECT_EQ((*found)->error.code(), Code::kInternal);
  EXPECT_EQ((*found)->error.message(), "kernel crashed");
}

TEST_F(DirectoryTest, RejectsBadRequestsWithoutSideEffects) {
  EXPECT_EQ(dir_.Create(1, 0, 0, DType::kF32, {-1}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(dir_.Create(1, 0, 0, static_cast<DType>(kNumDTypes), {1}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(dir_.Create(1, 0, 0, DType::kF32, {1 << 30, 1 << 30, 1 << 30}).status().code(),
            Code::kInvalidArgument);
  auto huge = dir_.Create(1, 0, 0, DType::kF32, {int64_t{kArena}});
  EXPECT_EQ(huge.status().code(), Code::kOutOfMemory);
  EXPECT_NE(huge.status().message().find("never fit"), std::string::npos);
  ASSERT_THAT(dir_.Create(1, 0, 5, DType::kF32, {1}), IsOk());
  EXPECT_EQ(dir_.Create(1, 0, 5, DType::kF32, {1}).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(dir_.Create(1, 1, 6, DType::kF32, {1}).status().code(), Code::kInvalidArgument);
  const auto stats = dir_.Stats();
  EXPECT_EQ(stats.objects, 1u);
  EXPECT_EQ(stats.shards, 1u);
  EXPECT_EQ(stats.bytes_in_use, ArenaAllocator::kAlignment);
}

TEST_F(DirectoryTest, PutCopiesAndSealsAndChecksTheSize) {
  std::vector<std::byte> arena(kArena);
  std::vector<int32_t> values{1, 2, 3};
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(values.data()), 12);
  auto put = dir_.Put(3, 0, 0, DType::kI32, {3}, bytes, arena);
  ASSERT_THAT(put, IsOk());
  EXPECT_TRUE(put->sealed);
  EXPECT_EQ(std::memcmp(arena.data() + put->offset, values.data(), 12), 0);
  auto wrong = dir_.Put(4, 0, 0, DType::kI32, {4}, bytes, arena);
  EXPECT_EQ(wrong.status().code(), Code::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("12 data bytes"), std::string::npos);
  EXPECT_EQ(dir_.Find(4, 0).status().code(), Code::kNotFound);
}

TEST_F(DirectoryTest, RefcountIsPerObjectAndFreesEveryShardAtZero) {
  ASSERT_THAT(dir_.Create(1, 0, 7, DType::kF32, {16}), IsOk());
  ASSERT_THAT(dir_.Create(1, 1, 7, DType::kF32, {16}), IsOk());
  ASSERT_THAT(dir_.Create(2, 0, 7, DType::kF32, {16}), IsOk());
  EXPECT_EQ(dir_.Stats().shards, 3u);
  ASSERT_THAT(dir_.Seal(1, 0), IsOk());
  ASSERT_THAT(dir_.Seal(1, 1), IsOk());
  auto released = dir_.Release(1);
  ASSERT_THAT(released, IsOk());
  EXPECT_EQ(*released, ReleaseOutcome::kFreed);  // one reference, held by the owner
  EXPECT_EQ(dir_.Find(1, 0).status().code(), Code::kNotFound);
  EXPECT_EQ(dir_.Find(1, 1).status().code(), Code::kNotFound);
  EXPECT_THAT(dir_.Find(2, 0), IsOk());
  EXPECT_EQ(dir_.Stats().bytes_in_use, ArenaAllocator::kAlignment);
  EXPECT_EQ(dir_.Release(1).status().code(), Code::kNotFound);
  EXPECT_EQ(dir_.Release(99).status().code(), Code::kNotFound);
}

TEST_F(DirectoryTest, SilentClientsLoseTheirObjectsOthersKeepTheirs) {
  ASSERT_THAT(dir_.Create(1, 0, /*owner=*/10, DType::kF32, {1}), IsOk());  // first sign of 10
  dir_.Heartbeat(20);
  ASSERT_THAT(dir_.Create(2, 0, /*owner=*/20, DType::kF32, {1}), IsOk());
  ASSERT_THAT(dir_.Create(3, 0, /*owner=*/0, DType::kF32, {1}), IsOk());  // unowned
  EXPECT_EQ(dir_.Stats().clients, 2u);

  clock_.Advance(kClientTimeout);  // exactly the timeout: not yet lapsed
  EXPECT_TRUE(dir_.Expire().empty());
  dir_.Heartbeat(20);
  clock_.Advance(milliseconds(1));
  auto collected = dir_.Expire();
  ASSERT_EQ(collected.size(), 1u);
  EXPECT_EQ(collected[0].client, 10u);
  EXPECT_EQ(collected[0].reason, CollectReason::kLapsed);
  EXPECT_EQ(collected[0].objects, (std::vector<uint64_t>{1}));
  EXPECT_EQ(dir_.Find(1, 0).status().code(), Code::kNotFound);
  EXPECT_THAT(dir_.Find(2, 0), IsOk());
  EXPECT_THAT(dir_.Find(3, 0), IsOk());

  // Creating objects does not keep a client alive; only heartbeats do.
  clock_.Advance(kClientTimeout / 2);
  ASSERT_THAT(dir_.Create(4, 0, 20, DType::kF32, {1}), IsOk());
  clock_.Advance(kClientTimeout);
  collected = dir_.Expire();
  ASSERT_EQ(collected.size(), 1u);
  EXPECT_EQ(collected[0].client, 20u);
  EXPECT_EQ(collected[0].objects, (std::vector<uint64_t>{2, 4}));
  EXPECT_THAT(dir_.Find(3, 0), IsOk());  // owner 0 is never collected
  const auto stats = dir_.Stats();
  EXPECT_EQ(stats.objects, 1u);
  EXPECT_EQ(stats.clients, 0u);
  EXPECT_EQ(stats.objects_per_owner, (std::map<uint64_t, uint64_t>{{0, 1}}));
}

TEST_F(DirectoryTest, WithAnRmItsTableKeepsClientsAndOneItDroppedLosesItsObjectsAtOnce) {
  dir_.FollowClientTable(milliseconds(100));
  ASSERT_THAT(dir_.Create(1, 0, /*owner=*/10, DType::kF32, {1}), IsOk());
  ASSERT_THAT(dir_.Create(2, 0, /*owner=*/20, DType::kF32, {1}), IsOk());
  ASSERT_THAT(dir_.Create(3, 0, /*owner=*/30, DType::kF32, {1}), IsOk());
  for (int period = 0; period < 5; ++period) {  // past the timeout, listed each period
    clock_.Advance(milliseconds(50));
    dir_.ClientTableHeard({10, 20, 30});
    EXPECT_TRUE(dir_.Expire().empty());
  }
  const std::optional<Collected> left = dir_.Left(10);
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->objects, (std::vector<uint64_t>{1}));
  EXPECT_EQ(dir_.Find(1, 0).status().code(), Code::kNotFound);
  EXPECT_FALSE(dir_.Left(10).has_value());  // told twice: collected once
  dir_.Goodbye(30);                         // said goodbye here, then the RM dropped it
  EXPECT_FALSE(dir_.Left(30).has_value());

  // The RM silent for a second: nobody is judged; back, a full timeout from its table.
  clock_.Advance(milliseconds(1000));
  EXPECT_TRUE(dir_.Expire().empty());
  dir_.ClientTableHeard({});
  for (int period = 0; period < 4; ++period) {  // the whole timeout, 20 no longer listed
    clock_.Advance(milliseconds(50));
    dir_.ClientTableHeard({});
    EXPECT_TRUE(dir_.Expire().empty());
  }
  clock_.Advance(milliseconds(1));
  dir_.ClientTableHeard({});
  const auto lapsed = dir_.Expire();
  ASSERT_EQ(lapsed.size(), 1u);
  EXPECT_EQ(lapsed[0].client, 20u);
  EXPECT_EQ(lapsed[0].objects, (std::vector<uint64_t>{2}));
}

TEST_F(DirectoryTest, GoodbyeFreesOnlyThatClientsObjects) {
  ASSERT_THAT(dir_.Create(1, 0, 10, DType::kF32, {8}), IsOk());
  ASSERT_THAT(dir_.Create(1, 1, 10, DType::kF32, {8}), IsOk());
  ASSERT_THAT(dir_.Create(2, 0, 11, DType::kF32, {8}), IsOk());
  EXPECT_EQ(dir_.Stats().objects_per_owner, (std::map<uint64_t, uint64_t>{{10, 1}, {11, 1}}));
  const Collected gone = dir_.Goodbye(10);
  EXPECT_EQ(gone.reason, CollectReason::kGoodbye);
  EXPECT_EQ(gone.objects, (std::vector<uint64_t>{1}));
  EXPECT_EQ(dir_.Find(1, 1).status().code(), Code::kNotFound);
  EXPECT_THAT(dir_.Find(2, 0), IsOk());
  EXPECT_EQ(dir_.Stats().objects_per_owner, (std::map<uint64_t, uint64_t>{{11, 1}}));

  // Late outputs for a departed client are refused, until the goodbye is forgotten.
  EXPECT_EQ(dir_.Create(5, 0, 10, DType::kF32, {1}).status().code(), Code::kCancelled);
  clock_.Advance(kClientTimeout + milliseconds(1));
  dir_.Heartbeat(11);
  EXPECT_TRUE(dir_.Expire().empty());  // nothing to collect for a departed client
  EXPECT_THAT(dir_.Create(5, 0, 10, DType::kF32, {1}), IsOk());
  // Goodbye of an unknown client is harmless.
  EXPECT_TRUE(dir_.Goodbye(12345).objects.empty());
}

TEST_F(DirectoryTest, AReleasedObjectStillBeingWrittenIsFreedOnceItsShardsAreSealed) {
  ASSERT_THAT(dir_.Create(1, 0, 7, DType::kF32, {16}), IsOk());
  ASSERT_THAT(dir_.Seal(1, 0), IsOk());
  // The releaser knows of two shards here; the second is not even created yet.
  auto outcome = dir_.Release(1, 7, 2);
  ASSERT_THAT(outcome, IsOk());
  EXPECT_EQ(*outcome, ReleaseOutcome::kFreedOnSeal);
  EXPECT_FALSE(dir_.FreeIfReleased(1));
  EXPECT_EQ(dir_.Release(1, 7, 2).status().code(), Code::kFailedPrecondition);
  ASSERT_THAT(dir_.Create(1, 1, 7, DType::kF32, {16}), IsOk());
  EXPECT_FALSE(dir_.FreeIfReleased(1));  // created, not written yet
  ASSERT_THAT(dir_.Seal(1, 1, Cancelled("run cancelled")), IsOk());
  EXPECT_TRUE(dir_.FreeIfReleased(1));
  EXPECT_EQ(dir_.Find(1, 0).status().code(), Code::kNotFound);
  EXPECT_EQ(dir_.Stats().bytes_in_use, 0u);
  EXPECT_EQ(dir_.Stats().objects, 0u);
}

TEST_F(DirectoryTest, AReleaseBeforeCreationIsATombstoneUntilTheObjectIsSealed) {
  auto outcome = dir_.Release(5, 7, 1);
  ASSERT_THAT(outcome, IsOk());
  EXPECT_EQ(*outcome, ReleaseOutcome::kRemembered);
  EXPECT_EQ(dir_.Stats().tombstones, 1u);
  EXPECT_EQ(dir_.Stats().tombstones_per_owner, (std::map<uint64_t, uint64_t>{{7, 1}}));
  EXPECT_EQ(dir_.Release(5, 7, 1).status().code(), Code::kFailedPrecondition);
  // Without an owner nothing bounds a tombstone: an unknown object is an error.
  EXPECT_EQ(dir_.Release(6).status().code(), Code::kNotFound);
  ASSERT_THAT(dir_.Create(5, 0, 7, DType::kF32, {16}), IsOk());
  EXPECT_EQ(dir_.Stats().tombstones, 0u);
  EXPECT_EQ(dir_.Stats().objects, 1u);
  ASSERT_THAT(dir_.Seal(5, 0), IsOk());
  EXPECT_TRUE(dir_.FreeIfReleased(5));
  EXPECT_EQ(dir_.Stats().objects, 0u);
  EXPECT_EQ(dir_.Stats().bytes_in_use, 0u);
  // The id is free again: a later object with it lives normally.
  ASSERT_THAT(dir_.Create(5, 0, 7, DType::kF32, {16}), IsOk());
  ASSERT_THAT(dir_.Seal(5, 0), IsOk());
  EXPECT_FALSE(dir_.FreeIfReleased(5));
}

TEST_F(DirectoryTest, TombstonesAreForgottenWithTheirOwner) {
  ASSERT_THAT(dir_.Release(5, 7, 1), IsOk());
  ASSERT_THAT(dir_.Release(6, 8, 1), IsOk());
  dir_.Goodbye(7);
  EXPECT_EQ(dir_.Stats().tombstones, 1u);
  // Client 8 was never heard from but through its release: it lapses like any client.
  clock_.Advance(kClientTimeout + milliseconds(1));
  dir_.Expire();
  EXPECT_EQ(dir_.Stats().tombstones, 0u);
  // A tombstone of another owner does not doom an object of the same id.
  ASSERT_THAT(dir_.Release(9, 8, 1), IsOk());
  ASSERT_THAT(dir_.Create(9, 0, 3, DType::kF32, {1}), IsOk());
  ASSERT_THAT(dir_.Seal(9, 0), IsOk());
  EXPECT_FALSE(dir_.FreeIfReleased(9));
  EXPECT_THAT(dir_.Find(9, 0), IsOk());
}

TEST_F(DirectoryTest, FreedSpaceIsReused) {
  const uint64_t quarter = kArena / 4;
  for (uint64_t id = 1; id <= 4; ++id) {
    ASSERT_THAT(dir_.Create(id, 0, 0, DType::kF32, {int64_t(quarter / 4)}), IsOk());
  }
  auto full = dir_.Create(5, 0, 0, DType::kF32, {1});
  ASSERT_EQ(full.status().code(), Code::kOutOfMemory);
  EXPECT_NE(full.status().message().find("object 5 shard 0"), std::string::npos);
  ASSERT_THAT(dir_.Seal(2, 0), IsOk());
  ASSERT_THAT(dir_.Release(2), IsOk());
  EXPECT_THAT(dir_.Create(5, 0, 0, DType::kF32, {1}), IsOk());
}

// A checkpoint written from a shard off the loop pins it: the object may go (a release, its
// owner's collection), its memory may not, until the last pin does.
TEST_F(DirectoryTest, APinnedBlockOutlivesItsObjectUntilItsLastUnpin) {
  const uint64_t most = kArena / 4 * 3;                   // a pinned object of 3/4 of the arena
  const int64_t half = static_cast<int64_t>(kArena / 8);  // f32 elements of half the arena
  auto a = dir_.Put(1, 0, /*owner=*/7, DType::kF32, {static_cast<int64_t>(most / 4)},
                    std::vector<std::byte>(most), std::span<std::byte>(arena_));
  ASSERT_THAT(a, IsOk());
  const Directory::Block block = dir_.Pin(*a);
  EXPECT_EQ(dir_.Pin(*a), block);  // two saves of the same shard at once

  ASSERT_EQ(*dir_.Release(1), ReleaseOutcome::kFreed);
  EXPECT_EQ(dir_.Find(1, 0).status().code(), Code::kNotFound);  // the object is gone
  EXPECT_EQ(dir_.Stats().bytes_in_use, most);                   // its memory is not
  auto b = dir_.Create(2, 0, 0, DType::kF32, {half});
  EXPECT_EQ(b.status().code(), Code::kOutOfMemory) << "the pinned block was handed out again";

  EXPECT_FALSE(dir_.Unpin(block));  // one pin left
  EXPECT_TRUE(dir_.Unpin(block));   // the last: freed now
  EXPECT_EQ(dir_.Stats().bytes_in_use, 0u);
  EXPECT_THAT(dir_.Create(2, 0, 0, DType::kF32, {half}), IsOk());
}

TEST_F(DirectoryTest, APinnedBlockOfACollectedClientIsFreedAtItsUnpin) {
  auto a = dir_.Create(1, 0, /*owner=*/7, DType::kF32, {16});
  ASSERT_THAT(a, IsOk());
  const Directory::Block block = dir_.Pin(*a);
  EXPECT_EQ(dir_.Goodbye(7).objects, std::vector<uint64_t>{1});
  EXPECT_GT(dir_.Stats().bytes_in_use, 0u);
  EXPECT_TRUE(dir_.Unpin(block));
  EXPECT_EQ(dir_.Stats().bytes_in_use, 0u);
}

TEST_F(DirectoryTest, UnpinningALiveObjectFreesNothing) {
  auto a = dir_.Create(1, 0, 0, DType::kF32, {16});
  ASSERT_THAT(a, IsOk());
  EXPECT_FALSE(dir_.Unpin(dir_.Pin(*a)));
  const uint64_t used = dir_.Stats().bytes_in_use;
  ASSERT_THAT(dir_.Seal(1, 0), IsOk());
  ASSERT_EQ(*dir_.Release(1), ReleaseOutcome::kFreed);  // no pin left: freed at once
  EXPECT_LT(dir_.Stats().bytes_in_use, used);
}

}  // namespace
}  // namespace atl::store
