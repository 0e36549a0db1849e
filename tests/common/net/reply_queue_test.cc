// A service's ROUTER loses a reply when the requester's queue is full (router_mandatory,
// no send wait), so a requester's DEALER queues all it is answered: a burst of replies
// several times what ZeroMQ's high-water marks and the kernel's socket buffers hold reaches
// a requester that reads them only afterwards, over real TCP on loopback.
#include <zmq.hpp>

#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "common/net/transport.h"
#include "tests/status_matchers.h"

namespace atl::net {
namespace {

using std::chrono::milliseconds;

constexpr int kReplies = 5000;        // five times the high-water mark of 1,000
constexpr size_t kReplyBytes = 4096;  // 20 MB in all: beyond the kernel's buffers too
constexpr milliseconds kStall{5000};  // how long the ROUTER may find its peer's queue full

TEST(ReplyQueueTest, ABurstOfRepliesBeyondTheHighWaterMarksReachesARequesterReadingLater) {
  zmq::context_t context;
  zmq::socket_t router = MakeSocket(context, zmq::socket_type::router);
  auto endpoint = Bind(router, "tcp://127.0.0.1:*");
  ASSERT_THAT(endpoint, IsOk());
  Requester requester(context, *endpoint);
  ASSERT_THAT(requester.Connect(), IsOk());
  ASSERT_THAT(requester.Post(proto::ReleaseObject{1}), IsOk());
  auto request = RecvFrames(router, milliseconds(5000));
  ASSERT_TRUE(request.ok() && request->has_value()) << "the request never came";
  const zmq::message_t& peer = (**request)[0];

  const std::string payload(kReplyBytes, 'x');
  for (int i = 0; i < kReplies; ++i) {
    while (true) {
      Frames data;
      data.emplace_back(payload.data(), payload.size());
      if (Send(router, &peer, 1, proto::Ok{}, std::move(data)).ok()) break;
      // The peer's queue is full: wait for room, as long as a stalled reader would take.
      zmq::pollitem_t writable{router.handle(), 0, ZMQ_POLLOUT, 0};
      ASSERT_EQ(zmq::poll(&writable, 1, kStall), 1)
          << "reply " << i << " found the requester's queue full for " << kStall.count()
          << " ms: it would have been lost";
    }
  }
  for (int i = 0; i < kReplies; ++i) {
    auto reply = RecvFrames(requester.socket(), milliseconds(5000));
    ASSERT_TRUE(reply.ok() && reply->has_value()) << "reply " << i << " never came";
  }
}

}  // namespace
}  // namespace atl::net
