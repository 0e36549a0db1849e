// PendingWork: registrations and remaps finish on their last answer, on the first failure,
// or past their deadline, each once; a remap with nothing to compile finishes at once; a
// drain is done once its own pass and every remap it waits for are.
#include "services/rm/pending_work.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace atl::rm {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using namespace std::chrono_literals;

const PendingWork::Clock::time_point t0{};

TEST(PendingWorkTest, ARegistrationFinishesOnItsLastAnswerOnce) {
  PendingWork pending(10s);
  const uint64_t id = pending.NewRequestId();
  pending.AddRegistration(id, "client", 7, 3, /*acks=*/2, t0);
  EXPECT_FALSE(pending.RegistrationAnswered(id, false));
  auto done = pending.RegistrationAnswered(id, false);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->client_request_id, 7u);
  EXPECT_EQ(done->function_id, 3u);
  EXPECT_FALSE(pending.RegistrationAnswered(id, false)) << "a late answer";
  EXPECT_EQ(pending.registrations(), 0u);
}

TEST(PendingWorkTest, OneFailureFinishesARemap) {
  PendingWork pending(10s);
  const uint64_t id = pending.NewRequestId();
  EXPECT_FALSE(pending.AddRemap(id, 4, "lost", /*acks=*/3, /*drain=*/0, t0));
  EXPECT_FALSE(pending.RegistrationAnswered(id, true)) << "not a registration";
  auto done = pending.RemapAnswered(id, true);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->slice, 4u);
  EXPECT_EQ(pending.remaps(), 0u);
}

TEST(PendingWorkTest, ARemapWithNothingToCompileFinishesAtOnce) {
  PendingWork pending(10s);
  auto done = pending.AddRemap(pending.NewRequestId(), 4, "drained", 0, 9, t0);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->drain, 9u);
  EXPECT_EQ(pending.remaps(), 0u);
}

TEST(PendingWorkTest, WorkPastItsDeadlineExpiresInIdOrder) {
  PendingWork pending(10s);
  const uint64_t early = pending.NewRequestId();
  const uint64_t later = pending.NewRequestId();
  const uint64_t remap = pending.NewRequestId();
  pending.AddRegistration(later, "c", 2, 20, 1, t0 + 1s);
  pending.AddRegistration(early, "c", 1, 10, 1, t0);
  pending.AddRemap(remap, 5, "lost", 1, 0, t0);
  EXPECT_THAT(pending.ExpiredRegistrations(t0 + 10s), IsEmpty());  // exactly the deadline
  auto expired = pending.ExpiredRegistrations(t0 + 11500ms);
  ASSERT_EQ(expired.size(), 2u);
  EXPECT_EQ(expired[0].function_id, 10u);
  EXPECT_EQ(expired[1].function_id, 20u);
  EXPECT_EQ(pending.ExpiredRemaps(t0 + 11s).size(), 1u);
  EXPECT_THAT(pending.ExpiredRemaps(t0 + 20s), IsEmpty());
}

TEST(PendingWorkTest, ADrainIsDoneOnceItsPassAndItsRemapsAre) {
  PendingWork pending(10s);
  const uint64_t drain = pending.StartDrain("operator", 12);
  pending.DrainMoved(drain, 4);
  pending.DrainMoved(drain, 5);
  pending.DrainKept(drain, 6);
  EXPECT_FALSE(pending.DrainStepDone(drain));  // remap of 4, within the pass
  EXPECT_FALSE(pending.DrainStepDone(drain));  // the pass
  auto done = pending.DrainStepDone(drain);    // remap of 5
  ASSERT_TRUE(done);
  EXPECT_EQ(done->routing_id, "operator");
  EXPECT_EQ(done->request_id, 12u);
  EXPECT_THAT(done->reply.moved, ElementsAre(4, 5));
  EXPECT_THAT(done->reply.kept, ElementsAre(6));
  EXPECT_FALSE(pending.DrainStepDone(drain));
  EXPECT_EQ(pending.drains(), 0u);
}

}  // namespace
}  // namespace atl::rm
