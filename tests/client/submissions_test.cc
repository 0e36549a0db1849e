// Submissions: which streamed submissions each scheduler has not answered, which runs it
// refused or said failed (and why), and what each message from a scheduler meant.
#include "client/submissions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/proto/codec.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

// `body` as a scheduler's socket brings it, under `request_id` (0: a notice).
template <typename T>
proto::Header Received(uint64_t request_id, const T& body) {
  const zmq::message_t frame = proto::EncodeHeader(request_id, body);
  auto header = proto::DecodeHeader(frame.data(), frame.size());
  EXPECT_THAT(header, IsOk());
  return *header;
}

using Heard = Submissions::Heard;

TEST(SubmissionsTest, ARunIsAnsweredOnceEverySchedulerAnswered) {
  Submissions submissions;
  submissions.Started(7);
  submissions.Sent("s0", 1, 7);
  submissions.Sent("s1", 1, 7);
  EXPECT_EQ(submissions.Unanswered("s0"), 1u);
  EXPECT_FALSE(submissions.Answered(7));
  const Heard first = submissions.Take("s0", Received(1, proto::Ok{}));
  EXPECT_EQ(first.kind, Heard::kAccepted);
  EXPECT_EQ(first.run, 7u);
  EXPECT_FALSE(first.ends_reads) << "accepted: the gangs there still read";
  EXPECT_EQ(submissions.Unanswered("s0"), 0u);
  EXPECT_FALSE(submissions.Answered(7)) << "s1 has not answered";
  EXPECT_EQ(submissions.Take("s1", Received(1, proto::Ok{})).kind, Heard::kAccepted);
  EXPECT_TRUE(submissions.Answered(7));
  EXPECT_EQ(submissions.Failure(7), nullptr);
}

TEST(SubmissionsTest, ARefusalFailsTheRunNamingTheScheduler) {
  Submissions submissions;
  submissions.Started(7);
  submissions.Sent("tcp://s0:1", 4, 7);
  const Heard refused = submissions.Take(
      "tcp://s0:1", Received(4, proto::ToError(InvalidArgument("node 3 has no shard"))));
  EXPECT_EQ(refused.kind, Heard::kRefused);
  EXPECT_TRUE(refused.ends_reads) << "it will not run there: no RunDone comes";
  EXPECT_TRUE(submissions.Answered(7));
  ASSERT_NE(submissions.Failure(7), nullptr);
  EXPECT_THAT(*submissions.Failure(7),
              StatusIs(Code::kInvalidArgument, "scheduler tcp://s0:1 refused run 7"));
  EXPECT_THAT(*submissions.Failure(7), StatusIs(Code::kInvalidArgument, "node 3 has no shard"));
}

TEST(SubmissionsTest, OnlyTheFirstFailureOfARunStillHeldIsKept) {
  Submissions submissions;
  submissions.Started(7);
  const Heard failed = submissions.Take(
      "s0", Received(0, proto::RunFailed{7, static_cast<int32_t>(Code::kInternal), "shard 2"}));
  EXPECT_EQ(failed.kind, Heard::kRunFailed);
  EXPECT_FALSE(failed.ends_reads);
  ASSERT_NE(submissions.Failure(7), nullptr);
  EXPECT_THAT(*submissions.Failure(7),
              StatusIs(Code::kInternal, "run 7 failed on island scheduler s0"));
  EXPECT_EQ(submissions.Take("s1", Received(0, proto::RunFailed{7, 13, "again"})).kind,
            Heard::kNothing);
  EXPECT_THAT(*submissions.Failure(7), StatusIs(Code::kInternal, "shard 2"));
  // A run gone: its failure is forgotten, and a late notice of it is not kept.
  submissions.Ended(7);
  EXPECT_EQ(submissions.Failure(7), nullptr);
  EXPECT_EQ(submissions.Take("s0", Received(0, proto::RunFailed{7, 13, "late"})).kind,
            Heard::kNothing);
  EXPECT_EQ(submissions.Failure(7), nullptr);
}

TEST(SubmissionsTest, RunDoneEndsReadsAndStaleAnswersMeanNothing) {
  Submissions submissions;
  submissions.Started(7);
  submissions.Sent("s0", 1, 7);
  const Heard done = submissions.Take("s0", Received(0, proto::RunDone{7}));
  EXPECT_EQ(done.kind, Heard::kRunDone);
  EXPECT_EQ(done.run, 7u);
  EXPECT_TRUE(done.ends_reads);
  EXPECT_EQ(submissions.Unanswered("s0"), 1u) << "a notice answers no submission";
  // An answer to no request, or from a scheduler never submitted to.
  EXPECT_EQ(submissions.Take("s0", Received(99, proto::Ok{})).kind, Heard::kNothing);
  EXPECT_EQ(submissions.Take("s9", Received(1, proto::Ok{})).kind, Heard::kNothing);
  EXPECT_EQ(submissions.Unanswered("s0"), 1u);
  EXPECT_EQ(submissions.Unanswered("s9"), 0u);
}

TEST(SubmissionsTest, SchedulersAreVisitedInOrderOnceSubmittedTo) {
  Submissions submissions;
  submissions.Sent("s1", 1, 7);
  submissions.Sent("s0", 1, 8);
  submissions.Sent("s1", 2, 8);
  std::vector<std::string> visited;
  submissions.ForEachScheduler([&](const std::string& s) { visited.push_back(s); });
  EXPECT_THAT(visited, ::testing::ElementsAre("s0", "s1"));
  EXPECT_EQ(submissions.Unanswered("s1"), 2u);
}

}  // namespace
}  // namespace atl
