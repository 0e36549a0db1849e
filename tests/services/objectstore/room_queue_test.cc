#include "services/objectstore/room_queue.h"
#include "tests/services/objectstore/fake_clock.h"
#include "tests/status_matchers.h"

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace atl::store {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kDeviceBytes = 1024;
constexpr int32_t kDevice0 = 0;
constexpr int32_t kDevice1 = 1;
constexpr uint64_t kOwner = 7;

// A reservation of `floats` 4-byte elements (a multiple of 16 is a whole aligned block).
proto::CreateObject Request(uint64_t object, int64_t floats, int32_t device = kDevice0,
                            uint64_t owner = kOwner) {
  return proto::CreateObject{object, 0, owner, DType::kF32, {floats}, device};
}

ReplyTo To(uint64_t request_id) { return ReplyTo{zmq::message_t("exec", 4), request_id}; }

class RoomQueueTest : public ::testing::Test {
 protected:
  // Admits a request that must wait; returns how many wait before it.
  size_t Queue(RoomQueue& queue, uint64_t request_id, const proto::CreateObject& request,
               std::optional<std::span<const std::byte>> put = std::nullopt) {
    Result<RoomQueue::Admitted> admitted = queue.Admit(To(request_id), request, put);
    EXPECT_THAT(admitted, IsOk());
    if (!admitted.ok()) return SIZE_MAX;
    EXPECT_EQ(admitted->outcome, RoomQueue::Outcome::kQueued) << request.object_id;
    return admitted->ahead;
  }

  // Fills `device` with objects 1..n of `floats` each, sealed, owned by owner 1.
  void Fill(int32_t device, int n, int64_t floats) {
    for (int i = 1; i <= n; ++i) {
      const uint64_t object = 1000 * (device + 1) + i;
      ASSERT_THAT(dir_.Create(object, 0, 1, DType::kF32, {floats}, device), IsOk());
      ASSERT_THAT(dir_.Seal(object, 0), IsOk());
    }
  }
  void Free(uint64_t object) {
    auto released = dir_.Release(object, 1);
    ASSERT_THAT(released, IsOk());
    ASSERT_EQ(*released, ReleaseOutcome::kFreed);
  }

  FakeClock clock_;
  Directory dir_{4096, milliseconds(1000), clock_, {kDeviceBytes, kDeviceBytes}};
  RoomQueue queue_{dir_, "h0"};
};

TEST_F(RoomQueueTest, ARequestThatFitsIsCreatedAtOnce) {
  Result<RoomQueue::Admitted> admitted = queue_.Admit(To(1), Request(10, 64), std::nullopt);
  ASSERT_THAT(admitted, IsOk());
  EXPECT_EQ(admitted->outcome, RoomQueue::Outcome::kCreated);
  EXPECT_EQ(admitted->to.request_id, 1u);  // given back, to answer it
  EXPECT_EQ(admitted->nbytes, 256u);
  EXPECT_EQ(admitted->created.pool, kDevice0);
  EXPECT_THAT(dir_.Find(10, 0), IsOk());
  EXPECT_FALSE(queue_.Queued(kDevice0));

  // The host arena has no queue: a shard there is created, or fails.
  admitted = queue_.Admit(To(2), Request(11, 64, MemoryPools::kHost), std::nullopt);
  ASSERT_THAT(admitted, IsOk());
  EXPECT_EQ(admitted->outcome, RoomQueue::Outcome::kCreated);
  EXPECT_EQ(admitted->created.pool, MemoryPools::kHost);
  EXPECT_EQ(
      queue_.Admit(To(3), Request(12, 4096, MemoryPools::kHost), std::nullopt).status().code(),
      Code::kOutOfMemory);
}

TEST_F(RoomQueueTest, ARequestThatCanNeverFitOrIsOverQuotaIsRefusedAtOnce) {
  Fill(kDevice0, 4, 64);  // full, so "never" is not "not now"
  Result<RoomQueue::Admitted> admitted = queue_.Admit(To(1), Request(10, 512), std::nullopt);
  ASSERT_THAT(admitted, IsOk());
  EXPECT_EQ(admitted->outcome, RoomQueue::Outcome::kRefused);
  EXPECT_EQ(admitted->refusal.code(), Code::kOutOfMemory);
  EXPECT_EQ(admitted->refusal.message(),
            "object 10 shard 0 needs 2048 bytes but device 0 of host h0 has 1024 bytes in all: it "
            "can never fit");

  Directory dir{4096, milliseconds(1000), clock_, {kDeviceBytes}, StoreQuota{0, 128, "on h0"}};
  RoomQueue queue{dir, "h0"};
  ASSERT_THAT(dir.Create(1, 0, 0, DType::kF32, {256}, kDevice0), IsOk());  // full (no owner)
  admitted = queue.Admit(To(2), Request(11, 64), std::nullopt);            // 256 bytes, quota 128
  ASSERT_THAT(admitted, IsOk());
  EXPECT_EQ(admitted->outcome, RoomQueue::Outcome::kRefused);
  EXPECT_EQ(admitted->refusal.code(), Code::kResourceExhausted);
  EXPECT_FALSE(queue.Queued(kDevice0));
}

TEST_F(RoomQueueTest, ABadRequestIsAnErrorAndQueuesNothing) {
  Fill(kDevice0, 4, 64);
  EXPECT_EQ(queue_.Admit(To(1), Request(10, 16, /*device=*/5), std::nullopt).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(queue_.Admit(To(2), Request(10, -1), std::nullopt).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(queue_.size(), 0u);
}

TEST_F(RoomQueueTest, ARequestQueuesBehindThoseOfItsDeviceEvenWhenItFits) {
  Fill(kDevice0, 3, 64);  // 256 bytes free
  Fill(kDevice1, 4, 64);
  EXPECT_EQ(Queue(queue_, 1, Request(10, 128)), 0u);  // 512 bytes: waits
  EXPECT_EQ(Queue(queue_, 2, Request(11, 16)), 1u);   // 64 bytes would fit, but waits behind
  EXPECT_EQ(Queue(queue_, 3, Request(12, 16, kDevice1)), 0u);
  EXPECT_THAT(dir_.Find(11, 0), ::testing::Not(IsOk()));
  EXPECT_TRUE(queue_.Queued(kDevice0));
  EXPECT_TRUE(queue_.Queued(kDevice1));
  EXPECT_EQ(queue_.size(), 3u);
}

TEST_F(RoomQueueTest, ASmallRequestNeverOvertakesALargeOneBeforeIt) {
  Fill(kDevice0, 4, 64);                     // 4 x 256 bytes: full
  (void)Queue(queue_, 1, Request(10, 128));  // 512 bytes
  (void)Queue(queue_, 2, Request(11, 16));   // 64 bytes
  EXPECT_FALSE(queue_.TakeReady().has_value());

  Free(1001);  // 256 free: the small one would fit, but waits behind the large one
  EXPECT_FALSE(queue_.TakeReady().has_value());
  EXPECT_THAT(dir_.Find(11, 0), ::testing::Not(IsOk()));

  Free(1002);  // 512 free: the large one, then nothing is left for the small one
  std::optional<RoomQueue::Ready> ready = queue_.TakeReady();
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->pending.request.object_id, 10u);
  EXPECT_EQ(ready->pending.to.request_id, 1u);
  ASSERT_THAT(ready->created, IsOk());
  EXPECT_EQ(ready->created->nbytes, 512u);
  EXPECT_THAT(dir_.Find(10, 0), IsOk());
  EXPECT_FALSE(queue_.TakeReady().has_value());

  Free(1003);
  ready = queue_.TakeReady();
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->pending.request.object_id, 11u);
  EXPECT_FALSE(queue_.Queued(kDevice0));
}

TEST_F(RoomQueueTest, APutsBytesAreCopiedToWaitWithIt) {
  Fill(kDevice0, 4, 64);
  std::vector<std::byte> bytes(64, std::byte{5});
  (void)Queue(queue_, 1, Request(10, 16), std::span<const std::byte>(bytes));
  bytes.assign(64, std::byte{9});  // the request's frame is gone once the handler returns
  Free(1001);
  std::optional<RoomQueue::Ready> ready = queue_.TakeReady();
  ASSERT_TRUE(ready.has_value());
  ASSERT_TRUE(ready->pending.put.has_value());
  EXPECT_EQ(*ready->pending.put, std::vector<std::byte>(64, std::byte{5}));
}

TEST_F(RoomQueueTest, AFullDeviceDoesNotHoldUpTheQueueOfAnother) {
  Fill(kDevice0, 4, 64);
  Fill(kDevice1, 4, 64);
  (void)Queue(queue_, 1, Request(10, 64));
  (void)Queue(queue_, 2, Request(20, 64, kDevice1));
  Free(2001);
  std::optional<RoomQueue::Ready> ready = queue_.TakeReady();
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->pending.request.object_id, 20u);
  EXPECT_FALSE(queue_.TakeReady().has_value());
  EXPECT_TRUE(queue_.Queued(kDevice0));
}

TEST_F(RoomQueueTest, ARequestOverItsQuotaOnceItsTurnComesIsTakenWithTheError) {
  Directory dir{4096, milliseconds(1000), clock_, {kDeviceBytes}, StoreQuota{1, 0, "on h0"}};
  RoomQueue queue{dir, "h0"};
  ASSERT_THAT(dir.Create(1, 0, 1, DType::kF32, {256}, kDevice0), IsOk());  // owner 1 fills it
  ASSERT_THAT(dir.Seal(1, 0), IsOk());
  // Admitted while owner 7 holds nothing here: both within its quota of one object then.
  (void)Queue(queue, 1, Request(10, 16));
  (void)Queue(queue, 2, Request(11, 16));  // owner 7's second object
  ASSERT_EQ(*dir.Release(1, 1), ReleaseOutcome::kFreed);

  std::optional<RoomQueue::Ready> first = queue.TakeReady();
  ASSERT_TRUE(first.has_value());
  EXPECT_THAT(first->created, IsOk());
  std::optional<RoomQueue::Ready> second = queue.TakeReady();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->pending.request.object_id, 11u);
  EXPECT_THAT(second->created, StatusIs(Code::kResourceExhausted, "store_objects"));
  EXPECT_EQ(queue.size(), 0u);
}

TEST_F(RoomQueueTest, ACollectedClientsRequestsAreTakenAndTheOthersKeepTheirOrder) {
  Fill(kDevice0, 4, 64);
  Fill(kDevice1, 4, 64);
  (void)Queue(queue_, 1, Request(10, 16, kDevice0, 8));
  (void)Queue(queue_, 2, Request(11, 16, kDevice0, kOwner));
  (void)Queue(queue_, 3, Request(12, 16, kDevice0, 8));
  (void)Queue(queue_, 4, Request(13, 16, kDevice1, 8));

  const std::vector<RoomQueue::Pending> taken = queue_.TakeClient(8);
  ASSERT_EQ(taken.size(), 3u);
  EXPECT_EQ(taken[0].request.object_id, 10u);
  EXPECT_EQ(taken[1].request.object_id, 12u);
  EXPECT_EQ(taken[2].request.object_id, 13u);
  EXPECT_EQ(queue_.size(), 1u);
  EXPECT_FALSE(queue_.Queued(kDevice1));

  EXPECT_EQ(queue_.TakeAll().size(), 1u);
  EXPECT_EQ(queue_.size(), 0u);
  EXPECT_FALSE(queue_.Queued(kDevice0));
}

TEST_F(RoomQueueTest, ATimedOutReadLearnsWhereItsProducerWaitsForRoom) {
  EXPECT_EQ(queue_.DescribeWait(10, 0), "");  // nothing waits for room
  Fill(kDevice0, 4, 64);
  (void)Queue(queue_, 1, Request(10, 64));
  (void)Queue(queue_, 2, Request(11, 64));

  const std::string own = queue_.DescribeWait(11, 0);
  EXPECT_NE(own.find("waits for room in device 0 (1024 of 1024 bytes held"), std::string::npos)
      << own;
  EXPECT_NE(own.find("1 more requests queued ahead of it"), std::string::npos) << own;
  EXPECT_NE(own.find("release what is no longer needed"), std::string::npos) << own;

  // Its producer's request has not come: the shortage may be holding it up.
  const std::string other = queue_.DescribeWait(99, 0);
  EXPECT_NE(other.find("device 0 has no room now"), std::string::npos) << other;
  EXPECT_NE(other.find("2 requests waiting for it"), std::string::npos) << other;
}

}  // namespace
}  // namespace atl::store
