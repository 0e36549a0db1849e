// RejectionLog: one line per peer per interval, the first at once and the rest as a count
// with the last error, on a clock the test moves by hand; and ServeRequests logging a flood
// of garbage from one real DEALER that way while still answering every message.
#include "common/net/rejection_log.h"

#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zmq.hpp>

#include "common/net/request_server.h"
#include "common/net/transport.h"
#include "tests/status_matchers.h"

namespace atl::net {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class RejectionLogTest : public ::testing::Test {
 protected:
  RejectionLogOptions Options() {
    RejectionLogOptions options;
    options.clock = [this] { return now_; };
    options.sink = [this](const std::string& line) { lines_.push_back(line); };
    return options;
  }

  std::chrono::steady_clock::time_point now_{};
  std::vector<std::string> lines_;
};

TEST_F(RejectionLogTest, TheFirstIsLoggedAtOnceAndTheRestAsOneCountPerInterval) {
  RejectionLog log(Options());
  log.Reject("peer 0a", InvalidArgument("bad 0"));
  ASSERT_THAT(lines_, ElementsAre("rejected 1 message from peer 0a: InvalidArgument: bad 0"));
  for (int i = 1; i <= 4213; ++i) {
    now_ += 200us;  // 4213 of them over 0.84 s: counted, not logged
    log.Reject("peer 0a", InvalidArgument("bad " + std::to_string(i)));
  }
  log.Flush();
  EXPECT_EQ(lines_.size(), 1u);
  now_ += 160ms;  // the interval has passed: the next rejection logs the count
  log.Reject("peer 0a", InvalidArgument("bad 4214"));
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_EQ(
      lines_[1],
      "rejected 4214 messages from peer 0a in the last 1.0 s; last: InvalidArgument: bad 4214");
  EXPECT_EQ(log.total(), 4215u);
}

TEST_F(RejectionLogTest, FlushLogsACountWhoseIntervalPassedAndForgetsQuietPeers) {
  RejectionLog log(Options());
  log.Reject("peer 0a", InvalidArgument("one"));
  log.Reject("peer 0a", InvalidArgument("two"));
  log.Flush();
  ASSERT_EQ(lines_.size(), 1u) << "within the interval";
  now_ += 1500ms;
  log.Flush();
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_EQ(lines_[1],
            "rejected 1 message from peer 0a in the last 1.5 s; last: InvalidArgument: two");
  now_ += 1s;
  log.Flush();  // quiet for an interval: forgotten
  now_ += 10ms;
  log.Reject("peer 0a", InvalidArgument("three"));
  ASSERT_EQ(lines_.size(), 3u) << "a peer quiet for an interval is logged at once again";
  EXPECT_EQ(lines_[2], "rejected 1 message from peer 0a: InvalidArgument: three");
}

TEST_F(RejectionLogTest, PeersAreCountedApart) {
  RejectionLog log(Options());
  log.Reject("peer 0a", InvalidArgument("x"));
  log.Reject("peer 0b", NotFound("y"));
  log.Reject("peer 0a", InvalidArgument("z"));
  EXPECT_THAT(lines_, ElementsAre("rejected 1 message from peer 0a: InvalidArgument: x",
                                  "rejected 1 message from peer 0b: NotFound: y"));
  now_ += 1s;
  log.Flush();
  ASSERT_EQ(lines_.size(), 3u) << "only peer 0a has one not logged yet";
  EXPECT_THAT(lines_[2], HasSubstr("rejected 1 message from peer 0a in the last 1.0 s"));
}

TEST_F(RejectionLogTest, PeersBeyondTheLimitAreCountedAsOtherPeers) {
  RejectionLogOptions options = Options();
  options.max_peers = 2;
  RejectionLog log(options);
  for (int i = 0; i < 1000; ++i) log.Reject("peer " + std::to_string(i), InvalidArgument("x"));
  ASSERT_EQ(lines_.size(), 3u) << "two peers and the others, not one line each";
  EXPECT_THAT(lines_[2], HasSubstr("from other peers"));
  now_ += 1s;
  log.Flush();
  ASSERT_EQ(lines_.size(), 4u);
  EXPECT_THAT(lines_[3], HasSubstr("rejected 997 messages from other peers"));
}

TEST_F(RejectionLogTest, WordsAndIntervalAreTheCallersToChoose) {
  RejectionLogOptions options = Options();
  options.verb = "got";
  options.one = "error reply";
  options.many = "error replies";
  options.interval = 100ms;
  RejectionLog log(options);
  log.Reject("tcp://127.0.0.1:5550", NotFound("client 3"));
  log.Reject("tcp://127.0.0.1:5550", NotFound("client 3"));
  log.Reject("tcp://127.0.0.1:5550", NotFound("client 3"));
  now_ += 100ms;
  log.Flush();
  EXPECT_THAT(lines_, ElementsAre("got 1 error reply from tcp://127.0.0.1:5550: NotFound: client 3",
                                  "got 2 error replies from tcp://127.0.0.1:5550 in the last 0.1 "
                                  "s; last: NotFound: client 3"));
}

TEST(HexBytesTest, PrintsEachByteAsTwoDigits) {
  EXPECT_EQ(HexBytes(std::string("\x00\x80\x00\x00\x01", 5)), "0080000001");
  EXPECT_EQ(HexBytes(""), "");
}

// A flood of garbage through ServeRequests: every message is answered with an error (and
// published), but the log gets one line for the peer, not one per message.
TEST_F(RejectionLogTest, ServeRequestsLogsAFloodOfGarbageOnceAndAnswersEveryMessage) {
  zmq::context_t context;
  zmq::socket_t router = MakeSocket(context, zmq::socket_type::router);
  ASSERT_THAT(Bind(router, "inproc://rejection-log-test"), IsOk());
  zmq::socket_t dealer = MakeSocket(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::routing_id, std::string("\x01\xab", 2));
  ASSERT_THAT(Connect(dealer, "inproc://rejection-log-test"), IsOk());
  EventPublisher events(context, "test");  // not connected: events are dropped
  RejectionLog rejected(Options());

  // In rounds of 250, well under the sockets' high-water marks.
  constexpr int kRounds = 8;
  constexpr int kPerRound = 250;
  constexpr int kMessages = kRounds * kPerRound;
  int replies = 0;
  for (int round = 0; round < kRounds; ++round) {
    for (int i = 0; i < kPerRound; ++i) {
      Frames garbage;
      garbage.emplace_back("\xc1 not msgpack", 13);
      ASSERT_THAT(SendFrames(dealer, garbage), IsOk());
    }
    const int want = replies + kPerRound;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (replies < want && std::chrono::steady_clock::now() < deadline) {
      ServeRequests(router, events, "error.test", rejected,
                    [](proto::Incoming&) { return Status::Ok(); });
      auto reply = RecvFrames(dealer, 10ms);
      ASSERT_THAT(reply, IsOk());
      if (reply->has_value()) ++replies;
    }
  }
  EXPECT_EQ(replies, kMessages) << "every message gets its error reply";
  EXPECT_EQ(rejected.total(), static_cast<uint64_t>(kMessages));
  ASSERT_EQ(lines_.size(), 1u) << "the clock did not move: one line";
  EXPECT_THAT(lines_[0], HasSubstr("rejected 1 message from peer 01ab: InvalidArgument"));
  now_ += 1s;
  ServeRequests(router, events, "error.test", rejected,
                [](proto::Incoming&) { return Status::Ok(); });
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_THAT(lines_[1], HasSubstr(fmt::format("rejected {} messages from peer 01ab in the last "
                                               "1.0 s; last: InvalidArgument",
                                               kMessages - 1)));
}

}  // namespace
}  // namespace atl::net
