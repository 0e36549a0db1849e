// The client's heartbeats (ClientHeartbeat over a HeartbeatSender) against ROUTER sockets
// in this process standing in for the RM and a store (real ZeroMQ, plain text): the clients
// of one key share one connection per service, a client's first beat there goes at once,
// and a client that stopped beating sends nothing more. Liveness against real services is
// the e2e tests' (GcTest, ManyTenantsTest).
#include "client/heartbeat.h"

#include <gtest/gtest.h>

#include "common/net/transport.h"

namespace atl {
namespace {

using namespace std::chrono_literals;

// A beat as a service gets it: from which connection, for which client.
struct Beat {
  std::string connection;  // the routing id
  uint64_t client = 0;
};

class ClientHeartbeatTest : public ::testing::Test {
 protected:
  // A service that hears beats.
  struct Service {
    explicit Service(zmq::context_t& context)
        : socket(net::MakeSocket(context, zmq::socket_type::router)) {}
    zmq::socket_t socket;
    std::string endpoint;
  };

  void SetUp() override {
    for (Service* s : {&rm_, &store_}) {
      auto bound = net::Bind(s->socket, "tcp://127.0.0.1:*");
      ASSERT_TRUE(bound.ok()) << bound.status().ToString();
      s->endpoint = *bound;
    }
  }

  // The next beat `service` heard, or nullopt after `timeout`.
  static std::optional<Beat> NextBeat(Service& service, std::chrono::milliseconds timeout = 10s) {
    auto frames = net::RecvFrames(service.socket, timeout);
    if (!frames.ok() || !*frames) return std::nullopt;
    const std::string connection = (**frames)[0].to_string();
    auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/true);
    if (!in.ok()) return std::nullopt;
    auto beat = in->header.As<proto::Heartbeat>();
    if (!beat.ok()) return std::nullopt;
    auto client = proto::HeartbeatClientId(*beat);
    if (!client.ok()) return std::nullopt;
    return Beat{connection, *client};
  }

  zmq::context_t context_;
  Service rm_{context_};
  Service store_{context_};
  const net::Credentials plain_;
};

TEST_F(ClientHeartbeatTest, ClientsOfOneKeyShareOneConnectionPerService) {
  ClientHeartbeat a(plain_, 1, rm_.endpoint, 20ms);
  ClientHeartbeat b(plain_, 2, rm_.endpoint, 20ms);
  std::set<uint64_t> heard;
  std::set<std::string> connections;
  for (int i = 0; i < 20; ++i) {
    auto beat = NextBeat(rm_);
    ASSERT_TRUE(beat.has_value()) << "the RM heard no beat for 10 s";
    heard.insert(beat->client);
    connections.insert(beat->connection);
  }
  EXPECT_EQ(heard, (std::set<uint64_t>{1, 2}));
  EXPECT_EQ(connections.size(), 1u) << "each client has a connection of its own";
}

TEST_F(ClientHeartbeatTest, OneSenderPerKeyAndPeriod) {
  const auto sender = HeartbeatSender::Shared(plain_, 20ms);
  EXPECT_EQ(HeartbeatSender::Shared(plain_, 20ms), sender);
  EXPECT_NE(HeartbeatSender::Shared(plain_, 30ms), sender);
  auto keys = net::NewKeyPair();
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  const net::Credentials other{*keys, keys->public_key};
  EXPECT_NE(HeartbeatSender::Shared(other, 20ms), sender);
}

TEST_F(ClientHeartbeatTest, AClientsFirstBeatToEachServiceGoesAtOnce) {
  // A period far longer than any wait below: only a first beat can arrive in time.
  ClientHeartbeat a(plain_, 7, rm_.endpoint, 1h);
  auto to_rm = NextBeat(rm_);
  ASSERT_TRUE(to_rm.has_value()) << "no first beat to the RM";
  EXPECT_EQ(to_rm->client, 7u);
  a.AddWatcher(store_.endpoint);
  auto to_store = NextBeat(store_);
  ASSERT_TRUE(to_store.has_value()) << "no first beat to a store added later";
  EXPECT_EQ(to_store->client, 7u);
  // A second client of the same sender also beats at once, the first does not again.
  ClientHeartbeat b(plain_, 8, rm_.endpoint, 1h);
  auto second = NextBeat(rm_);
  ASSERT_TRUE(second.has_value()) << "no first beat of the second client";
  EXPECT_EQ(second->client, 8u);
  EXPECT_FALSE(NextBeat(rm_, 200ms).has_value()) << "a beat before its period";
}

TEST_F(ClientHeartbeatTest, AClientThatStoppedBeatingSendsNothingMore) {
  auto a = std::make_unique<ClientHeartbeat>(plain_, 1, rm_.endpoint, 20ms);
  ClientHeartbeat b(plain_, 2, rm_.endpoint, 20ms);
  a->AddWatcher(store_.endpoint);
  b.AddWatcher(store_.endpoint);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(NextBeat(store_).has_value());
  a.reset();
  // A client that starts now: its first beat to each service leaves after a stopped, and
  // one connection keeps the order of its messages, so nothing of a's may follow it.
  ClientHeartbeat c(plain_, 3, rm_.endpoint, 20ms);
  c.AddWatcher(store_.endpoint);
  for (Service* service : {&rm_, &store_}) {
    bool after_stop = false;
    int b_beats = 0;
    while (b_beats < 3) {
      auto beat = NextBeat(*service);
      ASSERT_TRUE(beat.has_value()) << "the beats stopped for every client";
      after_stop = after_stop || beat->client == 3;
      if (!after_stop) continue;
      EXPECT_NE(beat->client, 1u) << "client 1 beat after it stopped";
      if (beat->client == 2) ++b_beats;
    }
  }
}

}  // namespace
}  // namespace atl
