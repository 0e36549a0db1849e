// CURVE keys on disk, the ZAP handler and handshake watching, on real sockets over loopback:
// who gets in on which audience, under which user id, and what a refused peer is told.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/net/curve_keys.h"
#include "common/net/secure_blocks.h"
#include "common/net/security.h"
#include "common/net/transport.h"
#include "common/net/zap_handler.h"
#include "tests/launcher/cluster_test_util.h"
#include "tests/status_matchers.h"

namespace atl::net {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::TempDir;

TEST(CurveKeysTest, KeyFilesRoundTripAndSecretsAreTheOwnersOnly) {
  TempDir dir;
  auto made = EnsureClusterKeys(dir.path());
  ASSERT_TRUE(made.ok() && *made) << made.status().ToString();
  auto again = EnsureClusterKeys(dir.path());
  ASSERT_THAT(again, IsOk());
  EXPECT_FALSE(*again) << "existing keys are kept";
  auto pair = ReadKeyPair(ClusterKeyPath(dir.path()));
  ASSERT_THAT(pair, IsOk());
  EXPECT_EQ(*ReadPublicKey(ClusterPublicKeyPath(dir.path())), pair->public_key);
  struct stat info {};
  ASSERT_EQ(stat(ClusterKeyPath(dir.path()).c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);

  ASSERT_THAT(EnsureClientKey(dir.path(), "alice"), IsOk());
  const auto allowed = ReadAllowedKeys(dir.path());
  ASSERT_EQ(allowed.size(), 1u);
  EXPECT_EQ(allowed.begin()->first, ReadKeyPair(ClientKeyPath(dir.path(), "alice"))->public_key);
  EXPECT_EQ(allowed.begin()->second, "alice");
}

TEST(CurveKeysTest, BadKeysAndNamesAreRefusedByName) {
  TempDir dir;
  const std::string path = dir.path() + "/broken.key";
  std::ofstream(path) << "public = \"too short\"\n";
  auto read = ReadKeyPair(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(read.status().message(), HasSubstr(path));
  EXPECT_EQ(EnsureClientKey(dir.path(), "alice").status().code(), Code::kFailedPrecondition);
  ASSERT_THAT(EnsureClusterKeys(dir.path()), IsOk());
  EXPECT_EQ(EnsureClientKey(dir.path(), "../escape").status().code(), Code::kInvalidArgument);
}

// A server process in miniature: a context with the cluster's keys and a ZAP handler, a
// ROUTER bound for `audience`.
class Server {
 public:
  Server(const std::string& keys, Audience audience,
         const std::string& endpoint = "tcp://127.0.0.1:*")
      : context_(*ServiceCredentials(keys)),
        zap_(ZapHandler::Start(context_, CredentialsOf(context_).own.public_key, keys).value()),
        router_(MakeSocket(context_, zmq::socket_type::router)) {
    endpoint_ = *Bind(router_, endpoint, audience);
  }
  const std::string& endpoint() const { return endpoint_; }

  // Answers one request with Ok; returns its sender's user id.
  Result<std::string> ServeOne() {
    ATOLL_ASSIGN_OR_RETURN(auto frames, RecvFrames(router_, 5000ms));
    if (!frames) return DeadlineExceeded("no request");
    ATOLL_ASSIGN_OR_RETURN(auto in, proto::ParseIncoming(std::move(*frames), true));
    ATOLL_RETURN_IF_ERROR(Reply(router_, in, proto::Ok{}));
    return in.sender.user_id;
  }

 private:
  KeyedContext context_;
  std::unique_ptr<ZapHandler> zap_;
  zmq::socket_t router_;
  std::string endpoint_;
};

class ZapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_THAT(EnsureClusterKeys(dir_.path()), IsOk());
    ASSERT_THAT(EnsureClientKey(dir_.path(), "alice"), IsOk());
  }

  // Sends one request with `credentials` and returns the reply's status.
  Status Call(const Credentials& credentials, const std::string& endpoint) {
    KeyedContext context(credentials);
    Requester requester(context, endpoint);
    ATOLL_RETURN_IF_ERROR(requester.Connect(/*watch_handshakes=*/true));
    return requester.Call<proto::Ok>(proto::Ok{}, 5000ms).status();
  }

  TempDir dir_;
};

TEST_F(ZapTest, MembersAndAllowedClientsGetInUnderTheirNames) {
  Server server(dir_.path(), Audience::kEveryone);
  for (const auto& [credentials, user] :
       {std::pair{*ServiceCredentials(dir_.path()), std::string("member")},
        std::pair{*ClientCredentials(dir_.path(), "alice"), std::string("client:alice")}}) {
    auto served = std::async(std::launch::async, [&] { return server.ServeOne(); });
    EXPECT_THAT(Call(credentials, server.endpoint()), IsOk()) << user;
    auto seen = served.get();
    ASSERT_THAT(seen, IsOk());
    EXPECT_EQ(*seen, user);
  }
}

TEST_F(ZapTest, UnknownKeysAndPlainTextAreRefusedAtTheHandshake) {
  Server server(dir_.path(), Audience::kEveryone);
  Credentials stranger = *ClientCredentials(dir_.path(), "alice");
  stranger.own = *NewKeyPair();
  Status refused = Call(stranger, server.endpoint());
  EXPECT_EQ(refused.code(), Code::kPermissionDenied) << refused.ToString();
  EXPECT_THAT(refused.message(), HasSubstr("refused this process's key"));
  Status plain = Call(Credentials{}, server.endpoint());
  EXPECT_EQ(plain.code(), Code::kPermissionDenied) << plain.ToString();
  EXPECT_THAT(plain.message(), HasSubstr("plain text"));
}

TEST_F(ZapTest, AServerKeyThatIsNotTheClustersIsRefusedAtTheHandshake) {
  Server server(dir_.path(), Audience::kEveryone);
  Credentials lost = *ClientCredentials(dir_.path(), "alice");
  lost.server_key = NewKeyPair()->public_key;  // another cluster's
  Status refused = Call(lost, server.endpoint());
  EXPECT_EQ(refused.code(), Code::kPermissionDenied) << refused.ToString();
  EXPECT_THAT(refused.message(), HasSubstr("keys do not match"));
}

// A peer killed while the kernel had already accepted a connection to it drops that
// connection mid-handshake, as a refusing server does; but it is down, not refusing: a
// caller is told the service is unreachable, not that the keys are wrong.
TEST_F(ZapTest, APeerThatDiesMidHandshakeIsDownNotRefusing) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(ntohs(address.sin_port));

  KeyedContext context(*ServiceCredentials(dir_.path()));
  Requester requester(context, endpoint);
  ASSERT_THAT(requester.Connect(/*watch_handshakes=*/true), IsOk());
  pollfd ready{listener, POLLIN, 0};
  ASSERT_EQ(poll(&ready, 1, 5000), 1) << "the requester never connected";
  const int accepted = accept(listener, nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  close(accepted);  // the handshake is cut short ...
  close(listener);  // ... and nothing listens there any more
  Status called = requester.Call<proto::Ok>(proto::Ok{}, 1000ms).status();
  EXPECT_EQ(called.code(), Code::kUnavailable) << called.ToString();
  EXPECT_THAT(called.message(), HasSubstr("not connected"));
}

TEST_F(ZapTest, AMembersOnlySocketRefusesClientKeys) {
  Server server(dir_.path(), Audience::kMembers);
  Status refused = Call(*ClientCredentials(dir_.path(), "alice"), server.endpoint());
  EXPECT_EQ(refused.code(), Code::kPermissionDenied) << refused.ToString();
  auto served = std::async(std::launch::async, [&] { return server.ServeOne(); });
  EXPECT_THAT(Call(*ServiceCredentials(dir_.path()), server.endpoint()), IsOk());
  EXPECT_THAT(served.get(), IsOk());
}

// A watched connection counts its drops: none while the peer serves, one once it is gone
// (a restarted peer knows nothing of what was in flight), and the count stays when a new
// peer at the same address takes the connection back.
TEST_F(ZapTest, AWatchedConnectionCountsItsDrops) {
  auto server = std::make_unique<Server>(dir_.path(), Audience::kEveryone);
  const std::string endpoint = server->endpoint();
  KeyedContext context(*ServiceCredentials(dir_.path()));
  Requester requester(context, endpoint);
  ASSERT_THAT(requester.Connect(/*watch_handshakes=*/true), IsOk());
  auto call = [&] {
    auto served = std::async(std::launch::async, [&] { return server->ServeOne(); });
    Status called = requester.Call<proto::Ok>(proto::Ok{}, 5000ms).status();
    EXPECT_THAT(served.get(), IsOk());
    return called;
  };
  ASSERT_THAT(call(), IsOk());
  EXPECT_EQ(requester.ConnectionDrops(), 0u);

  server.reset();
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (requester.ConnectionDrops() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);  // the monitor's events come on ZeroMQ's I/O thread
  }
  EXPECT_EQ(requester.ConnectionDrops(), 1u);

  server = std::make_unique<Server>(dir_.path(), Audience::kEveryone, endpoint);
  ASSERT_THAT(call(), IsOk());
  EXPECT_EQ(requester.ConnectionDrops(), 1u);
  EXPECT_THAT(requester.Reachable(), IsOk());
}

// libzmq's handshakes reach this process's sodium_allocarray and sodium_free: the second
// client's handshake takes blocks the first one's released (this test binary, as every
// atoll process, links secure_blocks.cc).
TEST_F(ZapTest, HandshakesReuseTheSecureBlocksEarlierOnesReleased) {
  Server server(dir_.path(), Audience::kEveryone);
  auto call = [&] {
    auto served = std::async(std::launch::async, [&] { return server.ServeOne(); });
    EXPECT_THAT(Call(*ClientCredentials(dir_.path(), "alice"), server.endpoint()), IsOk());
    EXPECT_THAT(served.get(), IsOk());
  };
  call();
  const SecureBlockCounts after_first = SecureBlocks();
  EXPECT_GT(after_first.allocated, 0u) << "libzmq's allocations did not come here";
  call();
  const SecureBlockCounts after_second = SecureBlocks();
  EXPECT_GT(after_second.reused, after_first.reused);
}

TEST(SecureBlocksTest, AReleasedBlockIsZeroedAndReusedForItsSizeOnly) {
  KeepSecureBlocks();
  constexpr size_t kBytes = 3 * 41;  // a size no handshake asks for
  auto* block = static_cast<unsigned char*>(sodium_allocarray(3, 41));
  ASSERT_NE(block, nullptr);
  std::fill(block, block + kBytes, 0xab);
  sodium_free(block);
  const SecureBlockCounts before = SecureBlocks();

  void* other_size = sodium_allocarray(1, kBytes + 1);
  EXPECT_NE(other_size, block);
  auto* again = static_cast<unsigned char*>(sodium_allocarray(kBytes, 1));
  EXPECT_EQ(again, block);
  EXPECT_EQ(std::count(again, again + kBytes, 0), static_cast<long>(kBytes))
      << "a kept block must hold nothing of its last user's secrets";
  EXPECT_EQ(SecureBlocks().reused, before.reused + 1);
  sodium_free(again);
  sodium_free(other_size);
  sodium_free(nullptr);  // as libsodium's: nothing to do
}

TEST(SecureBlocksTest, KeepsAtMostItsLimitAndRefusesSizesThatOverflow) {
  KeepSecureBlocks();
  EXPECT_EQ(sodium_allocarray(std::numeric_limits<size_t>::max() / 2, 4), nullptr);
  const uint64_t kept_before = SecureBlocks().kept;
  std::vector<void*> blocks;
  for (size_t i = 0; i < kMaxKeptBlocksPerSize + 8; ++i) {
    blocks.push_back(sodium_allocarray(1, 77));  // a size no handshake asks for
  }
  for (void* block : blocks) sodium_free(block);
  EXPECT_EQ(SecureBlocks().kept, kept_before + kMaxKeptBlocksPerSize);
}

}  // namespace
}  // namespace atl::net
