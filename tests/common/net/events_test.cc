// The event stream: a real PUB/SUB round trip over inproc, and DecodeEvent on bad bytes.
#include "common/net/events.h"
#include "common/net/event_reader.h"

#include <chrono>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <msgpack.hpp>
#include <zmq.hpp>

#include "common/net/transport.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

using std::chrono::milliseconds;

zmq::message_t Bytes(const std::string& s) { return zmq::message_t(s.data(), s.size()); }

std::string Packed(const auto& value) {
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, value);
  return std::string(buffer.data(), buffer.size());
}

TEST(EventsTest, PublishedEventArrivesAndDecodes) {
  zmq::context_t context;
  zmq::socket_t sub = net::MakeSocket(context, zmq::socket_type::sub);
  ASSERT_THAT(net::Bind(sub, "inproc://events-test"), IsOk());
  sub.set(zmq::sockopt::subscribe, "program.");
  EventPublisher publisher(context, "client/1");
  ASSERT_THAT(publisher.Connect("inproc://events-test"), IsOk());

  const EventFields fields = {{"run", uint64_t{5}},
                              {"delta", int64_t{-3}},
                              {"ratio", 0.25},
                              {"ok", true},
                              {"name", std::string("dense")}};
  // A new subscription reaches the publisher asynchronously and events sent before it are
  // dropped (the slow-joiner problem): publish until one arrives, up to a deadline.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::optional<net::Frames> frames;
  while (!frames && std::chrono::steady_clock::now() < deadline) {
    publisher.Publish("gang.done", {{"gang", uint64_t{1}}});  // not subscribed: never arrives
    publisher.Publish("program.submitted", fields);
    auto got = net::RecvFrames(sub, milliseconds(20));
    ASSERT_THAT(got, IsOk());
    frames = std::move(*got);
  }
  ASSERT_TRUE(frames.has_value()) << "no event within the deadline";
  ASSERT_EQ(frames->size(), 2u);
  auto event = DecodeEvent((*frames)[0], (*frames)[1]);
  ASSERT_THAT(event, IsOk());
  EXPECT_EQ(event->topic, "program.submitted");
  EXPECT_EQ(event->fields["src"], "client/1");
  ASSERT_TRUE(event->fields["ts_us"].is_number_integer());
  EXPECT_LT(std::abs(event->fields["ts_us"].get<int64_t>() - NowMicros()), 60'000'000);
  EXPECT_EQ(event->fields["run"].get<uint64_t>(), 5u);
  EXPECT_EQ(event->fields["delta"].get<int64_t>(), -3);
  EXPECT_EQ(event->fields["ratio"].get<double>(), 0.25);
  EXPECT_EQ(event->fields["ok"].get<bool>(), true);
  EXPECT_EQ(event->fields["name"], "dense");
  EXPECT_EQ(event->fields.size(), 7u);

  const std::string line = FormatEventLine(*event);
  EXPECT_NE(line.find("program.submitted"), std::string::npos) << line;
  EXPECT_NE(line.find("src=client/1"), std::string::npos) << line;
  EXPECT_NE(line.find("run=5"), std::string::npos) << line;

  // Whatever else is queued is more of the same topic: the filter kept gang.* out.
  for (;;) {
    auto more = net::RecvFrames(sub, milliseconds(0));
    ASSERT_THAT(more, IsOk());
    if (!*more) break;
    EXPECT_EQ((**more)[0].to_string(), "program.submitted");
  }
}

TEST(EventsTest, UnconnectedPublisherDropsEvents) {
  zmq::context_t context;
  EventPublisher publisher(context, "nobody");
  publisher.Publish("program.submitted", {{"run", uint64_t{1}}});  // must not block or crash
}

// Found by fuzzing: a string that is not UTF-8 made every JSON writer of the event throw
// (`atoll watch --json`, the dashboard). Decoding makes strings valid.
TEST(DecodeEventTest, StringsAreMadeValidUtf8) {
  std::map<std::string, std::vector<std::string>> body{{"k\xff", {"v\xc3"}}};
  auto event = DecodeEvent(Bytes("gang.\xfe"), Bytes(Packed(body)));
  ASSERT_THAT(event, IsOk());
  EXPECT_EQ(event->topic, "gang.\xef\xbf\xbd");
  nlohmann::json json = event->fields;
  EXPECT_EQ(json.dump(), "{\"k\xef\xbf\xbd\":[\"v\xef\xbf\xbd\"]}");
}

TEST(DecodeEventTest, MalformedBodiesAreInvalidArgument) {
  const zmq::message_t topic = Bytes("program.x");
  EXPECT_EQ(DecodeEvent(topic, Bytes("")).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(DecodeEvent(topic, Bytes(Packed(5))).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(DecodeEvent(topic, Bytes(Packed(std::vector<int>{1, 2}))).status().code(),
            Code::kInvalidArgument);
  // A key that is not a string; a value of a type events never carry (binary).
  EXPECT_EQ(DecodeEvent(topic, Bytes(Packed(std::map<int, int>{{1, 2}}))).status().code(),
            Code::kInvalidArgument);
  const std::string bin_value = std::string("\x81\xa1k\xc4\x01", 5) + '\0';
  EXPECT_EQ(DecodeEvent(topic, Bytes(bin_value)).status().code(), Code::kInvalidArgument);
}

TEST(DecodeEventTest, EveryTruncationIsInvalidArgument) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_map(2);
  packer.pack(std::string("ts_us"));
  packer.pack(int64_t{1});
  packer.pack(std::string("src"));
  packer.pack(std::string("rm"));
  const std::string body(buffer.data(), buffer.size());
  ASSERT_THAT(DecodeEvent(Bytes("t"), Bytes(body)), IsOk());
  for (size_t n = 0; n < body.size(); ++n) {
    EXPECT_EQ(DecodeEvent(Bytes("t"), Bytes(body.substr(0, n))).status().code(),
              Code::kInvalidArgument)
        << n;
  }
}

// A 100 kB body of nested one-element arrays: without a depth bound, unpacking and the
// recursive JSON conversion overflow the stack.
TEST(DecodeEventTest, DeeplyNestedBodyIsInvalidArgument) {
  const std::string body = std::string("\x81\xa1k", 3) + std::string(100000, '\x91') + "\xc0";
  EXPECT_EQ(DecodeEvent(Bytes("t"), Bytes(body)).status().code(), Code::kInvalidArgument);
}

TEST(DecodeEventTest, RandomGarbageNeverCrashes) {
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<size_t> length(0, 64);
  for (int i = 0; i < 20000; ++i) {
    std::string body(length(rng), '\0');
    for (char& c : body) c = static_cast<char>(byte(rng));
    if (i % 2 == 0 && !body.empty()) body[0] = '\x83';  // a map of three
    auto event = DecodeEvent(Bytes("garbage"), Bytes(body));
    if (!event.ok()) {
      ASSERT_EQ(event.status().code(), Code::kInvalidArgument) << event.status().ToString();
    }
  }
}

}  // namespace
}  // namespace atl
