// Awaiting a store's replies by request id (client/store_calls.h), against a ROUTER socket in
// this process standing in for an object store (real ZeroMQ, no store logic): the answers to
// several requests come in whatever order the store sends them.
#include "client/store_calls.h"

#include <gtest/gtest.h>

#include "common/net/transport.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

using namespace std::chrono_literals;

class StoreCallsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto bound = net::Bind(store_, "tcp://127.0.0.1:*");
    ASSERT_THAT(bound, IsOk());
    requester_ = std::make_unique<net::Requester>(context_, *bound);
    ASSERT_THAT(requester_->Connect(), IsOk());
  }

  // Sends `n` puts; returns their request ids and the requests as the store got them.
  std::set<uint64_t> SendPuts(int n, std::vector<proto::Incoming>& got) {
    std::set<uint64_t> ids;
    for (int i = 0; i < n; ++i) {
      auto id = requester_->Send(proto::PutObject{uint64_t(i + 1), 0, 1, DType::kF32, {}});
      EXPECT_THAT(id, IsOk());
      ids.insert(*id);
    }
    for (int i = 0; i < n; ++i) {
      auto frames = net::RecvFrames(store_, 5s);
      EXPECT_TRUE(frames.ok() && frames->has_value());
      auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/true);
      EXPECT_THAT(in, IsOk());
      got.push_back(std::move(*in));
    }
    return ids;
  }

  Deadline Soon() const { return std::chrono::steady_clock::now() + 2s; }

  zmq::context_t context_;
  zmq::socket_t store_ = net::MakeSocket(context_, zmq::socket_type::router);
  std::unique_ptr<net::Requester> requester_;
};

TEST_F(StoreCallsTest, AwaitOksTakesTheAnswersInAnyOrder) {
  std::vector<proto::Incoming> got;
  const std::set<uint64_t> ids = SendPuts(3, got);
  // The first put waited for room: answered last.
  for (size_t i : {2, 1, 0}) ASSERT_THAT(net::Reply(store_, got[i], proto::Ok{}), IsOk());
  EXPECT_THAT(AwaitOks(*requester_, ids, Soon()), IsOk());
}

TEST_F(StoreCallsTest, AwaitOksFailsWithAnErrorAnswerAndWhenAnAnswerNeverComes) {
  std::vector<proto::Incoming> got;
  std::set<uint64_t> ids = SendPuts(2, got);
  ASSERT_THAT(net::Reply(store_, got[0], proto::Ok{}), IsOk());
  ASSERT_THAT(net::ReplyError(store_, got[1], OutOfMemory("no room for object 2")), IsOk());
  const Status refused = AwaitOks(*requester_, ids, Soon());
  EXPECT_EQ(refused.code(), Code::kOutOfMemory) << refused.ToString();
  EXPECT_NE(refused.message().find("no room for object 2"), std::string::npos);

  got.clear();
  ids = SendPuts(2, got);
  ASSERT_THAT(net::Reply(store_, got[1], proto::Ok{}), IsOk());  // the first is never answered
  const auto start = std::chrono::steady_clock::now();
  const Status unanswered = AwaitOks(*requester_, ids, std::chrono::steady_clock::now() + 200ms);
  EXPECT_EQ(unanswered.code(), Code::kDeadlineExceeded) << unanswered.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s) << "the wait keeps to its deadline";
}

}  // namespace
}  // namespace atl
