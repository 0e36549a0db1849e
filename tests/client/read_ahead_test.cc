// ReadAhead's bookkeeping against a ROUTER socket in this process standing in for an object
// store (real ZeroMQ, no store logic): which reads go out and when, what a reply becomes,
// the window, and what a dropped run leaves. The client against real stores is
// tests/e2e/read_ahead_test.cc.
#include "client/read_ahead.h"

#include <gtest/gtest.h>

#include "common/net/transport.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

using namespace std::chrono_literals;
using Lookup = ReadAhead::Lookup;

class ReadAheadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto bound = net::Bind(store_, "tcp://127.0.0.1:*");
    ASSERT_THAT(bound, IsOk());
    endpoint_ = *bound;
  }

  ReadAhead::Shard ShardOf(uint64_t object, uint64_t bytes = 64) {
    return {endpoint_, object, 0, bytes};
  }

  // The next read the store got, or nullopt after a while.
  std::optional<proto::Incoming> NextRead() {
    auto frames = net::RecvFrames(store_, 5s);
    if (!frames.ok() || !*frames) return std::nullopt;
    auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/true);
    if (!in.ok()) return std::nullopt;
    return std::move(*in);
  }

  // Every read the store got until none came for a short while.
  std::vector<proto::GetObject> Reads(std::vector<proto::Incoming>* raw = nullptr) {
    std::vector<proto::GetObject> reads;
    while (true) {
      auto frames = net::RecvFrames(store_, 200ms);
      if (!frames.ok() || !*frames) return reads;
      auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/true);
      if (!in.ok()) continue;
      reads.push_back(in->header.As<proto::GetObject>().value());
      if (raw != nullptr) raw->push_back(std::move(*in));
    }
  }

  // Runs 2 and 3 (objects 20 and 30) read ahead by a wait for run 1: the reads the store got.
  std::vector<proto::Incoming> ReadTwoAhead() {
    ahead_.Add(2, {ShardOf(20)});
    ahead_.Add(3, {ShardOf(30)});
    ahead_.ReadAfter(1, 100);
    std::vector<proto::Incoming> raw;
    Reads(&raw);
    return raw;
  }

  // Collects replies until `object`'s read is no longer open, at most a few seconds.
  Lookup AwaitAnswer(uint64_t object) {
    for (int i = 0; i < 100; ++i) {
      std::vector<zmq::pollitem_t> items;
      ahead_.AddPollItems(items);
      if (!items.empty()) (void)zmq::poll(items, 50ms);
      ahead_.Collect();
      Lookup found = ahead_.Take(object, 0);
      if (found.state != Lookup::kOpen) return found;
    }
    return {Lookup::kOpen, std::nullopt};
  }

  zmq::context_t context_;
  zmq::socket_t store_ = net::MakeSocket(context_, zmq::socket_type::router);
  std::string endpoint_;
  ReadAhead ahead_{context_};
};

TEST_F(ReadAheadTest, AWaitReadsOnlyTheLaterRunsAndEachReplyIsTakenOnce) {
  ahead_.Add(1, {ShardOf(10)});
  ahead_.Add(2, {ShardOf(20)});
  ahead_.Add(3, {ShardOf(30)});
  ahead_.ReadAfter(2, 1234);  // run 1 came earlier: not read ahead
  std::vector<proto::Incoming> raw;
  const auto reads = Reads(&raw);
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reads[0], (proto::GetObject{30, 0, 1234, true}));
  EXPECT_EQ(ahead_.Take(30, 0).state, Lookup::kOpen);
  EXPECT_EQ(ahead_.Take(10, 0).state, Lookup::kNone);
  EXPECT_EQ(ahead_.Take(20, 0).state, Lookup::kNone) << "run 2 is read by its own wait";

  const float value[2] = {1, 2};
  net::Frames data;
  data.emplace_back(value, sizeof(value));
  ASSERT_THAT(
      net::Reply(store_, raw[0], proto::GetObjectReply{DType::kF32, {2}, 0, 8, 1}, std::move(data)),
      IsOk());
  Lookup found = AwaitAnswer(30);
  ASSERT_EQ(found.state, Lookup::kAnswered);
  ASSERT_TRUE(found.reply.has_value());
  EXPECT_EQ(found.reply->header.kind(), proto::Kind::kGetObjectReply);
  ASSERT_EQ(found.reply->data.size(), 1u);
  EXPECT_EQ(found.reply->data[0].size(), sizeof(value));
  EXPECT_EQ(ahead_.Take(30, 0).state, Lookup::kNone) << "a reply is handed out once";

  ahead_.ReadAfter(2, 1234);
  EXPECT_TRUE(Reads().empty()) << "a run read ahead once is not read ahead again";
}

TEST_F(ReadAheadTest, AReadThatOutlivedItsWaitIsForgottenAndOtherErrorsAreAnswers) {
  const std::vector<proto::Incoming> raw = ReadTwoAhead();
  ASSERT_EQ(raw.size(), 2u);
  ASSERT_THAT(net::ReplyError(store_, raw[0], DeadlineExceeded("not sealed in time")), IsOk());
  ASSERT_THAT(net::ReplyError(store_, raw[1], Cancelled("released before it was sealed")), IsOk());
  EXPECT_EQ(AwaitAnswer(20).state, Lookup::kNone) << "its wait must read it again";
  Lookup failed = AwaitAnswer(30);
  ASSERT_EQ(failed.state, Lookup::kAnswered);
  EXPECT_EQ(failed.reply->header.kind(), proto::Kind::kError);
}

TEST_F(ReadAheadTest, TheWindowBoundsRunsAndBytes) {
  for (uint64_t run = 2; run < 2 + ReadAhead::kWindowRuns + 10; ++run) {
    ahead_.Add(run, {ShardOf(run)});
  }
  ahead_.ReadAfter(1, 100);
  EXPECT_EQ(Reads().size(), ReadAhead::kWindowRuns);

  ReadAhead big(context_);
  const uint64_t bytes = ReadAhead::kMaxResultBytes;
  const uint64_t fit = ReadAhead::kWindowBytes / bytes;
  for (uint64_t run = 2; run < 2 + fit + 5; ++run) {
    big.Add(run, {{endpoint_, 1000 + run, 0, bytes}});
  }
  big.ReadAfter(1, 100);
  EXPECT_EQ(Reads().size(), fit);
}

TEST_F(ReadAheadTest, ADroppedRunNamesTheStoresWhereItsReadIsOpenAndItsLateReplyIsIgnored) {
  const std::vector<proto::Incoming> raw = ReadTwoAhead();
  ASSERT_EQ(raw.size(), 2u);
  const auto open = ahead_.Drop(2);
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open.begin()->first, endpoint_);
  EXPECT_TRUE(ahead_.Drop(2).empty()) << "dropped once";
  EXPECT_TRUE(ahead_.Drop(4).empty()) << "never added";

  // The release goes through that socket, after the read.
  ASSERT_THAT(open.begin()->second->Post(proto::ReleaseObject{20, 0, 1}), IsOk());
  auto release = NextRead();
  ASSERT_TRUE(release.has_value());
  EXPECT_EQ(release->header.kind(), proto::Kind::kReleaseObject);

  ASSERT_THAT(net::Reply(store_, raw[0], proto::GetObjectReply{}), IsOk());  // run 2's, late
  ASSERT_THAT(net::Reply(store_, raw[1], proto::GetObjectReply{}), IsOk());
  EXPECT_EQ(AwaitAnswer(30).state, Lookup::kAnswered);
  EXPECT_EQ(ahead_.Take(20, 0).state, Lookup::kNone);
  // Run 3's read was answered, so nothing of it is open any more.
  EXPECT_TRUE(ahead_.Drop(3).empty());
}

}  // namespace
}  // namespace atl
