// HeartbeatThread against a ROUTER socket in this process standing in for the RM (real
// ZeroMQ, plain text): it connects before the client has an id (so that under CURVE its
// handshake runs alongside the hello's), sends nothing until Start, then beats at once.
// Liveness against real services: GcTest, ManyTenantsTest.
#include "client/heartbeat.h"

#include <gtest/gtest.h>

#include "common/net/transport.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

using namespace std::chrono_literals;

TEST(HeartbeatThreadTest, ConnectsBeforeStartAndBeatsOnlyOnceStartedTheFirstAtOnce) {
  zmq::context_t context;
  zmq::socket_t rm = net::MakeSocket(context, zmq::socket_type::router);
  auto endpoint = net::Bind(rm, "tcp://127.0.0.1:*");
  ASSERT_THAT(endpoint, IsOk());
  ASSERT_EQ(zmq_socket_monitor(rm.handle(), "inproc://heartbeat-test-rm", ZMQ_EVENT_ACCEPTED), 0);
  zmq::socket_t accepted(context, zmq::socket_type::pair);
  accepted.connect("inproc://heartbeat-test-rm");

  HeartbeatThread heartbeat(context, *endpoint);
  auto event = net::RecvFrames(accepted, 10s);
  ASSERT_TRUE(event.ok() && event->has_value()) << "no connection to the RM before Start";
  EXPECT_FALSE(net::RecvFrames(rm, 200ms)->has_value()) << "a beat before Start";

  // A period far longer than the wait: only the first beat can arrive in time.
  heartbeat.Start(42, 1h);
  auto frames = net::RecvFrames(rm, 10s);
  ASSERT_TRUE(frames.ok() && frames->has_value()) << "no first beat after Start";
  auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/true);
  ASSERT_THAT(in, IsOk());
  auto beat = in->header.As<proto::Heartbeat>();
  ASSERT_THAT(beat, IsOk());
  EXPECT_EQ(proto::HeartbeatClientId(*beat).value(), 42u);
}

}  // namespace
}  // namespace atl
