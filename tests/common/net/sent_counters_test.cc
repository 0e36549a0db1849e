// Sent-message counters: a real DEALER/ROUTER round trip over inproc counts each message
// once, under its kind, with its header and data bytes (never the routing id).
#include "common/net/sent_counters.h"

#include <unistd.h>

#include <chrono>
#include <string>
#include <variant>

#include <gtest/gtest.h>
#include <zmq.hpp>

#include "common/net/transport.h"
#include "tests/status_matchers.h"

namespace atl::net {
namespace {

using std::chrono::milliseconds;

SentCount Of(proto::Kind kind) {
  const auto counts = SentCounts();
  auto it = counts.find(kind);
  return it == counts.end() ? SentCount{} : it->second;
}

TEST(SentCountersTest, CountsRequestsAndRepliesByKindWithTheirBytes) {
  zmq::context_t context;
  zmq::socket_t router = MakeSocket(context, zmq::socket_type::router);
  ASSERT_THAT(Bind(router, "inproc://sent-counters-test"), IsOk());
  Requester requester(context, "inproc://sent-counters-test");
  ASSERT_THAT(requester.Connect(), IsOk());

  const SentCount release_before = Of(proto::Kind::kReleaseObject);
  const SentCount ok_before = Of(proto::Kind::kOk);
  const proto::ReleaseObject request{42};
  const std::string payload(1000, 'x');
  Frames data;
  data.emplace_back(payload.data(), payload.size());
  ASSERT_THAT(requester.Post(request, std::move(data)), IsOk());

  auto got = RecvFrames(router, milliseconds(5000));
  ASSERT_TRUE(got.ok() && got->has_value());
  const uint64_t header_bytes = (**got)[1].size();
  const SentCount release = Of(proto::Kind::kReleaseObject);
  EXPECT_EQ(release.messages, release_before.messages + 1);
  EXPECT_EQ(release.bytes, release_before.bytes + header_bytes + payload.size());

  // A reply on the ROUTER: counted without its routing-id frame.
  auto in = proto::ParseIncoming(std::move(**got), /*routed=*/true);
  ASSERT_THAT(in, IsOk());
  ASSERT_THAT(Reply(router, *in, proto::Ok{}), IsOk());
  auto reply = RecvFrames(requester.socket(), milliseconds(5000));
  ASSERT_TRUE(reply.ok() && reply->has_value());
  const SentCount ok = Of(proto::Kind::kOk);
  EXPECT_EQ(ok.messages, ok_before.messages + 1);
  EXPECT_EQ(ok.bytes, ok_before.bytes + (**reply)[0].size());
}

TEST(SentCountersTest, EventFieldsNameEachKindSent) {
  CountSent(proto::Kind::kDispatch, 7);
  const SentCount dispatch = Of(proto::Kind::kDispatch);
  bool msgs = false, bytes = false, pid = false;
  for (const auto& [name, value] : SentCountFields()) {
    if (name == "Dispatch.msgs") msgs = std::get<uint64_t>(value) == dispatch.messages;
    if (name == "Dispatch.bytes") bytes = std::get<uint64_t>(value) == dispatch.bytes;
    // The counts are the process's: a reader adds up one report per pid.
    if (name == "pid") pid = std::get<uint64_t>(value) == static_cast<uint64_t>(getpid());
  }
  EXPECT_TRUE(msgs);
  EXPECT_TRUE(bytes);
  EXPECT_TRUE(pid);
}

}  // namespace
}  // namespace atl::net
