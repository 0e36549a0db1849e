#include "services/objectstore/waiting_reads.h"

#include <string>

#include <gtest/gtest.h>

namespace atl::store {
namespace {

using std::chrono::milliseconds;

// A reply address for a test: the peer's name as its routing id.
ReplyTo To(const std::string& peer, uint64_t request_id) {
  return ReplyTo{zmq::message_t(peer.data(), peer.size()), request_id};
}

class WaitingReadsTest : public ::testing::Test {
 protected:
  TimePoint At(int ms) const { return start_ + milliseconds(ms); }

  const TimePoint start_{};  // the fake clock's "now" is At(0) unless a test moves it
  WaitingReads reads_;
};

TEST_F(WaitingReadsTest, TheTimerIsArmedOnlyWhenADeadlineComesBeforeItsArming) {
  EXPECT_EQ(reads_.Add(1, 0, To("a", 1), true, 100, At(0)), At(100));
  EXPECT_EQ(reads_.Add(1, 1, To("a", 2), true, 200, At(0)), std::nullopt);  // later: keep
  EXPECT_EQ(reads_.Add(2, 0, To("b", 3), true, 100, At(0)), std::nullopt);  // the same
  EXPECT_EQ(reads_.Add(2, 1, To("b", 4), true, 30, At(10)), At(40));        // earlier: re-arm
  EXPECT_EQ(reads_.size(), 4u);
}

TEST_F(WaitingReadsTest, ASealAnswersTheReadsOfItsShardInArrivalOrder) {
  (void)reads_.Add(1, 0, To("a", 1), true, 100, At(0));
  (void)reads_.Add(1, 1, To("a", 2), true, 100, At(0));
  (void)reads_.Add(1, 0, To("b", 3), false, 100, At(0));
  EXPECT_TRUE(reads_.Waits(1, 0));
  EXPECT_FALSE(reads_.Waits(1, 2));

  const std::vector<WaitingReads::Read> taken = reads_.TakeShard(1, 0);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].to.request_id, 1u);
  EXPECT_TRUE(taken[0].inline_data);
  EXPECT_EQ(taken[1].to.request_id, 3u);
  EXPECT_EQ(taken[1].to.routing_id.to_string(), "b");
  EXPECT_FALSE(taken[1].inline_data);
  EXPECT_FALSE(reads_.Waits(1, 0));
  EXPECT_TRUE(reads_.Waits(1, 1));  // another shard of the object still waits
  EXPECT_TRUE(reads_.TakeShard(1, 0).empty());
}

TEST_F(WaitingReadsTest, AnObjectThatWillNeverBeSealedTakesTheReadsOfEveryShardOfItOnly) {
  (void)reads_.Add(1, 0, To("a", 1), true, 100, At(0));
  (void)reads_.Add(2, 0, To("a", 2), true, 100, At(0));
  (void)reads_.Add(2, 7, To("a", 3), true, 100, At(0));
  (void)reads_.Add(3, 0, To("a", 4), true, 100, At(0));

  const std::vector<WaitingReads::Taken> taken = reads_.TakeObject(2);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].object, 2u);
  EXPECT_EQ(taken[0].shard, 0u);
  EXPECT_EQ(taken[1].shard, 7u);
  EXPECT_EQ(taken[1].read.to.request_id, 3u);
  EXPECT_TRUE(reads_.Waits(1, 0));
  EXPECT_TRUE(reads_.Waits(3, 0));
  EXPECT_EQ(reads_.size(), 2u);
}

TEST_F(WaitingReadsTest, AFiringTakesTheReadsDueAndReArmsForTheEarliestLeft) {
  (void)reads_.Add(1, 0, To("a", 1), true, 50, At(0));
  (void)reads_.Add(1, 1, To("a", 2), true, 100, At(0));
  (void)reads_.Add(1, 2, To("a", 3), true, 250, At(0));
  (void)reads_.Add(1, 3, To("a", 4), true, 200, At(0));

  WaitingReads::Expiry expiry = reads_.Expire(At(100));  // a deadline at `now` has come
  ASSERT_EQ(expiry.expired.size(), 2u);
  EXPECT_EQ(expiry.expired[0].shard, 0u);
  EXPECT_EQ(expiry.expired[0].read.timeout_ms, 50u);
  EXPECT_EQ(expiry.expired[1].shard, 1u);
  EXPECT_EQ(expiry.arm_at, At(200));
  EXPECT_EQ(reads_.size(), 2u);

  // Armed for 200 now: a later deadline leaves it, an earlier one moves it.
  EXPECT_EQ(reads_.Add(2, 0, To("b", 5), true, 200, At(100)), std::nullopt);
  EXPECT_EQ(reads_.Add(2, 1, To("b", 6), true, 50, At(100)), At(150));
}

TEST_F(WaitingReadsTest, AReadAnsweredEarlyLeavesAFiringThatFindsNothingAndDisarms) {
  (void)reads_.Add(1, 0, To("a", 1), true, 50, At(0));
  ASSERT_EQ(reads_.TakeShard(1, 0).size(), 1u);

  WaitingReads::Expiry expiry = reads_.Expire(At(50));
  EXPECT_TRUE(expiry.expired.empty());
  EXPECT_EQ(expiry.arm_at, std::nullopt);  // nothing waits: the store sleeps
  // Disarmed: the next read arms it, even for a deadline later than the last arming.
  EXPECT_EQ(reads_.Add(1, 1, To("a", 2), true, 500, At(60)), At(560));
}

TEST_F(WaitingReadsTest, AnEarlyFiringTakesNothingAndReArms) {
  (void)reads_.Add(1, 0, To("a", 1), true, 100, At(0));
  WaitingReads::Expiry expiry = reads_.Expire(At(99));
  EXPECT_TRUE(expiry.expired.empty());
  EXPECT_EQ(expiry.arm_at, At(100));
  EXPECT_TRUE(reads_.Waits(1, 0));
}

}  // namespace
}  // namespace atl::store
