// Per-client quotas in one object store: OwnerUsage's bookkeeping, and the Directory that
// keeps it as shards are created and objects freed (released, said goodbye, lapsed).
#include "services/objectstore/owner_usage.h"

#include <cstddef>
#include <vector>

#include <gtest/gtest.h>

#include "services/objectstore/directory.h"
#include "tests/services/objectstore/fake_clock.h"
#include "tests/status_matchers.h"

namespace atl::store {
namespace {

using std::chrono::milliseconds;
using Use = OwnerUsage::Use;

TEST(OwnerUsageTest, CountsObjectsAndBytesPerOwnerAndGivesThemBack) {
  OwnerUsage usage({/*objects=*/2, /*bytes=*/100, "on host h0"});
  EXPECT_THAT(usage.Check(7, true, 60), IsOk());
  usage.Add(7, true, 60);
  usage.Add(7, false, 40);  // a second shard of the same object
  EXPECT_EQ(usage.Of(7), (Use{1, 100}));
  EXPECT_EQ(usage.Of(8), (Use{0, 0}));

  const Status bytes = usage.Check(7, true, 1);
  EXPECT_EQ(bytes.code(), Code::kResourceExhausted);
  EXPECT_EQ(bytes.message(),
            "client 7 over its store_bytes quota on host h0: 100 bytes in use + 1 requested > "
            "100");
  EXPECT_THAT(usage.Check(7, false, 0), IsOk()) << "a shard of nothing takes nothing";
  EXPECT_THAT(usage.Check(8, true, 100), IsOk()) << "another owner has its own quota";

  usage.Remove(7, 100);
  EXPECT_EQ(usage.Of(7), (Use{0, 0}));
  EXPECT_THAT(usage.Check(7, true, 100), IsOk());
}

TEST(OwnerUsageTest, RefusesTheObjectsQuotaFirst) {
  OwnerUsage usage({/*objects=*/1, /*bytes=*/100, "on host h0"});
  usage.Add(7, true, 100);
  const Status s = usage.Check(7, true, 10);
  EXPECT_EQ(s.message(),
            "client 7 over its store_objects quota on host h0: 1 objects in use + 1 requested > 1");
}

TEST(OwnerUsageTest, OwnerZeroAndZeroLimitsAreUnlimited) {
  OwnerUsage limited({1, 1, "on host h0"});
  limited.Add(0, true, 1000);
  EXPECT_THAT(limited.Check(0, true, 1000), IsOk());
  EXPECT_EQ(limited.Of(0), (Use{1, 1000}));
  OwnerUsage unlimited;
  unlimited.Add(7, true, uint64_t{1} << 40);
  EXPECT_THAT(unlimited.Check(7, true, uint64_t{1} << 40), IsOk());
}

constexpr milliseconds kUsageClientTimeout{200};
constexpr uint64_t kQuotaBytes = 1024;  // 256 f32

// A store of a 64 KiB arena and one 4 KiB device, where each client may hold 3 objects
// of 1 KiB in all.
class DirectoryQuotaTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  Directory dir_{64 * 1024, kUsageClientTimeout, clock_, {4096}, {3, kQuotaBytes, "on host h0"}};
};

TEST_F(DirectoryQuotaTest, CreateRefusesWhatWouldGoOverTheQuotaAndChangesNothing) {
  ASSERT_THAT(dir_.Create(1, 0, 7, DType::kF32, {200}), IsOk());  // 800 bytes
  auto over = dir_.Create(2, 0, 7, DType::kF32, {57});            // 228 more: 1028 > 1024
  ASSERT_EQ(over.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(over.status().message(),
            "client 7 over its store_bytes quota on host h0: 800 bytes in use + 228 requested > "
            "1024");
  EXPECT_EQ(dir_.Find(2, 0).status().code(), Code::kNotFound);
  EXPECT_EQ(dir_.UsageOf(7), (Use{1, 800}));
  EXPECT_THAT(dir_.Create(2, 0, 7, DType::kF32, {56}), IsOk());  // exactly 1024
  EXPECT_EQ(dir_.UsageOf(7), (Use{2, 1024}));
  // Another client is not affected.
  EXPECT_THAT(dir_.Create(3, 0, 8, DType::kF32, {256}), IsOk());
}

TEST_F(DirectoryQuotaTest, AnObjectCountsOnceWhateverItsShardsHere) {
  for (uint32_t shard = 0; shard < 3; ++shard) {
    ASSERT_THAT(dir_.Create(1, shard, 7, DType::kF32, {1}), IsOk());
  }
  ASSERT_THAT(dir_.Create(2, 0, 7, DType::kF32, {1}), IsOk());
  ASSERT_THAT(dir_.Create(3, 0, 7, DType::kF32, {1}), IsOk());
  EXPECT_EQ(dir_.UsageOf(7), (Use{3, 20}));
  EXPECT_EQ(dir_.Create(4, 0, 7, DType::kF32, {1}).status().code(), Code::kResourceExhausted);
  EXPECT_THAT(dir_.Create(3, 1, 7, DType::kF32, {1}), IsOk()) << "a shard of a counted object";
}

TEST_F(DirectoryQuotaTest, PutIsRefusedLikeCreate) {
  std::vector<std::byte> arena(dir_.pools().region_bytes());
  const std::vector<std::byte> data(2048);
  auto put = dir_.Put(1, 0, 7, DType::kF32, {512}, data, arena);
  EXPECT_EQ(put.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(dir_.Find(1, 0).status().code(), Code::kNotFound);
  EXPECT_EQ(dir_.UsageOf(7), (Use{0, 0}));
}

TEST_F(DirectoryQuotaTest, TheQuotaComesBeforeMemory) {
  // Device 0 holds 4096 bytes; 1200 bytes are over the quota before they are over the device.
  auto over = dir_.Create(1, 0, 7, DType::kF32, {300}, /*pool=*/0);
  EXPECT_EQ(over.status().code(), Code::kResourceExhausted);
  ASSERT_THAT(dir_.Create(2, 0, /*owner=*/0, DType::kF32, {1000}, 0), IsOk());  // nearly full
  // Within the quota but not in memory now: OutOfMemory, as without quotas.
  EXPECT_EQ(dir_.Create(3, 0, 7, DType::kF32, {256}, 0).status().code(), Code::kOutOfMemory);
  EXPECT_EQ(dir_.CheckQuota(7, 3, 1024).code(), Code::kOk);
  EXPECT_EQ(dir_.CheckQuota(7, 3, 1025).code(), Code::kResourceExhausted);
}

TEST_F(DirectoryQuotaTest, ARefusedShardHoldsNothingAndCountsForNothing) {
  ASSERT_THAT(dir_.Reject(1, 0, 7, DType::kF32, {100000}, OutOfMemory("never fits")), IsOk());
  EXPECT_EQ(dir_.UsageOf(7), (Use{0, 0}));
  ASSERT_THAT(dir_.Create(1, 1, 7, DType::kF32, {10}), IsOk());  // its first shard with memory
  EXPECT_EQ(dir_.UsageOf(7), (Use{1, 40}));
  ASSERT_THAT(dir_.Seal(1, 1), IsOk());
  ASSERT_THAT(dir_.Release(1), IsOk());
  EXPECT_EQ(dir_.UsageOf(7), (Use{0, 0}));
}

TEST_F(DirectoryQuotaTest, EveryFreeGivesTheQuotaBack) {
  // Released.
  ASSERT_THAT(dir_.Create(1, 0, 7, DType::kF32, {256}), IsOk());
  ASSERT_THAT(dir_.Seal(1, 0), IsOk());
  ASSERT_THAT(dir_.Release(1, 7, 1), IsOk());
  EXPECT_EQ(dir_.UsageOf(7), (Use{0, 0}));
  // Released before it was written: given back once it is sealed and freed.
  ASSERT_THAT(dir_.Create(2, 0, 7, DType::kF32, {256}), IsOk());
  ASSERT_EQ(*dir_.Release(2, 7, 1), ReleaseOutcome::kFreedOnSeal);
  EXPECT_EQ(dir_.UsageOf(7), (Use{1, 1024}));
  ASSERT_THAT(dir_.Seal(2, 0), IsOk());
  ASSERT_TRUE(dir_.FreeIfReleased(2));
  EXPECT_EQ(dir_.UsageOf(7), (Use{0, 0}));
  // Said goodbye.
  ASSERT_THAT(dir_.Create(3, 0, 7, DType::kF32, {256}), IsOk());
  dir_.Goodbye(7);
  EXPECT_EQ(dir_.UsageOf(7), (Use{0, 0}));
  // Lapsed.
  ASSERT_THAT(dir_.Create(4, 0, 8, DType::kF32, {256}), IsOk());
  clock_.Advance(kUsageClientTimeout + milliseconds(1));
  ASSERT_EQ(dir_.Expire().size(), 1u);
  EXPECT_EQ(dir_.UsageOf(8), (Use{0, 0}));
  EXPECT_THAT(dir_.Create(5, 0, 8, DType::kF32, {256}), IsOk());
}

}  // namespace
}  // namespace atl::store
