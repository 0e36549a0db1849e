// CURVE authentication and tenant isolation on a real cluster (config/test.toml, whose
// security.mode is "curve"): who may connect at all, and what an authenticated client may
// touch. Client A holds key "alice", client B key "bob"; B's raw requests carry B's key, as
// an attacker's would, whatever ids they name.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>

#include "common/net/curve_keys.h"
#include "common/net/transport.h"
#include "common/proto/codec.h"
#include "common/proto/ids.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/doubling_program.h"
#include "tests/e2e/event_recorder.h"
#include "tests/e2e/member_context.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

// A context whose sockets hold client key `name` of the cluster's keys directory.
net::Credentials ClientKey(const std::string& keys_dir, const std::string& name) {
  auto credentials = net::ClientCredentials(keys_dir, name);
  EXPECT_THAT(credentials, IsOk());
  return credentials.ok() ? *credentials : net::Credentials{};
}

class SecurityTest : public ClusterTest {
 public:
  static void SetUpTestSuite() {
    ClusterTest::SetUpTestSuite();
    for (const char* name : {"alice", "bob"}) {
      ASSERT_THAT(net::EnsureClientKey(KeysDir(), name), IsOk());
    }
  }

 protected:
  static std::unique_ptr<Client> ConnectAs(const std::string& key) {
    auto client = Client::Connect({.rm_endpoint = RmEndpoint(),
                                   .name = key,
                                   .request_timeout = 5s,
                                   .keys_dir = KeysDir(),
                                   .key_name = key});
    EXPECT_THAT(client, IsOk());
    return client.ok() ? std::move(client).value() : nullptr;
  }

  static std::string Endpoint(const std::string& process, const std::string& key) {
    const ProcessInfo* p = cluster_->info().Find(process);
    return p != nullptr && p->endpoints.count(key) ? p->endpoints.at(key) : "";
  }

  // A request from `context`, the status of its reply (handshake failures included).
  template <typename Reply, typename Request>
  static Result<Reply> Ask(zmq::context_t& context, const std::string& endpoint,
                           const Request& request, net::Frames data = {}) {
    net::Requester requester(context, endpoint);
    ATOLL_RETURN_IF_ERROR(requester.Connect(/*watch_handshakes=*/true));
    return requester.Call<Reply>(request, 5s, std::move(data));
  }

  static net::Frames Bytes(const std::vector<float>& values) {
    net::Frames frames;
    frames.emplace_back(values.data(), values.size() * sizeof(float));
    return frames;
  }

  // A one-op function on a one-device slice of `client`, and a program calling it.
  static Result<Program> Doubling(Client& client) {
    ATOLL_ASSIGN_OR_RETURN(Slice slice, client.CreateSlice(1));
    return testing::Doubling(client, slice, 2);
  }

  static void ExpectRunsCorrectly(Client& client, const Program& program) {
    auto run = client.Submit(program, {Tensor::F32({2}, {1, 2})});
    ASSERT_THAT(run, IsOk());
    auto out = run->Wait(20s);
    ASSERT_THAT(out, IsOk());
    EXPECT_EQ(out->at(0).ToString(), Tensor::F32({2}, {2, 4}).ToString());
  }
};

TEST_F(SecurityTest, AClientWithoutKeysIsRefusedAtConnect) {
  const auto started = std::chrono::steady_clock::now();
  auto client =
      Client::Connect({.rm_endpoint = RmEndpoint(), .request_timeout = 10s, .keys_dir = "plain"});
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Code::kPermissionDenied) << client.status().ToString();
  EXPECT_THAT(client.status().message(), HasSubstr("plain text"));
  // Told by the handshake, not by the request's timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

TEST_F(SecurityTest, AClientWhoseKeyIsNotAllowedIsRefused) {
  auto pair = net::NewKeyPair();
  ASSERT_THAT(pair, IsOk());
  ASSERT_THAT(net::WriteKeyPair(net::ClientKeyPath(KeysDir(), "mallory"), *pair), IsOk());
  auto client = Client::Connect({.rm_endpoint = RmEndpoint(),
                                 .request_timeout = 10s,
                                 .keys_dir = KeysDir(),
                                 .key_name = "mallory"});
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Code::kPermissionDenied) << client.status().ToString();
  EXPECT_THAT(client.status().message(), HasSubstr("refused this process's key"));
}

TEST_F(SecurityTest, AllowedKeysAreReadAgainWhenTheFolderChanges) {
  auto pair = net::NewKeyPair();
  ASSERT_THAT(pair, IsOk());
  ASSERT_THAT(net::WriteKeyPair(net::ClientKeyPath(KeysDir(), "carol"), *pair), IsOk());
  const ClientOptions carol{.rm_endpoint = RmEndpoint(),
                            .request_timeout = 10s,
                            .keys_dir = KeysDir(),
                            .key_name = "carol"};
  EXPECT_FALSE(Client::Connect(carol).ok());
  // Allowed from the next connection on, without a restart ...
  const std::string allowed = net::AllowedKeyPath(KeysDir(), "carol");
  ASSERT_THAT(net::WritePublicKey(allowed, pair->public_key), IsOk());
  auto admitted = Client::Connect(carol);
  ASSERT_THAT(admitted, IsOk());
  // ... and refused again once its file is gone.
  std::filesystem::remove(allowed);
  auto refused = Client::Connect(carol);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kPermissionDenied) << refused.status().ToString();
}

TEST_F(SecurityTest, AClientTouchesOnlyItsOwnThings) {
  auto a = ConnectAs("alice");
  auto b = ConnectAs("bob");
  ASSERT_TRUE(a && b);
  auto a_program = Doubling(*a);
  ASSERT_THAT(a_program, IsOk());
  net::KeyedContext alice(ClientKey(KeysDir(), "alice"));
  net::KeyedContext bob(ClientKey(KeysDir(), "bob"));
  EventRecorder events(EventsEndpoint());

  // A's object in a store, put by A.
  const std::string store = Endpoint("objectstore-i0h0", "endpoint");
  const uint64_t object = proto::MakeObjectId(a->id(), uint64_t{1} << 39);
  const proto::PutObject put{object, 0, a->id(), DType::kF32, {2}};
  ASSERT_THAT(Ask<proto::Ok>(alice, store, put, Bytes({7, 8})), IsOk());

  auto expect_denied = [](const auto& result, const std::string& what) {
    EXPECT_EQ(result.status().code(), Code::kPermissionDenied)
        << what << ": " << result.status().ToString();
  };
  // B may not read, release or overwrite it, whatever owner it names.
  expect_denied(Ask<proto::GetObjectReply>(bob, store, proto::GetObject{object, 0, 0, true}),
                "read");
  expect_denied(Ask<proto::Ok>(bob, store, proto::ReleaseObject{object, a->id(), 1}), "release");
  expect_denied(Ask<proto::Ok>(bob, store, proto::ReleaseObject{object, b->id(), 1}),
                "release as itself");
  expect_denied(Ask<proto::Ok>(bob, store, put, Bytes({0, 0})), "overwrite as A");
  expect_denied(Ask<proto::Ok>(bob, store, proto::PutObject{object, 0, b->id(), DType::kF32, {2}},
                               Bytes({0, 0})),
                "overwrite as itself");
  // Each refusal is an error event too.
  auto event = events.WaitFor(
      "error.store",
      [](const Event& e) { return e.fields.dump().find("PermissionDenied") != std::string::npos; },
      10s);
  EXPECT_TRUE(event.has_value()) << "no error.store event for a refused request";

  // B may not act as A at the RM or the scheduler, nor call A's functions.
  const std::string rm = RmEndpoint();
  expect_denied(Ask<proto::Ok>(bob, rm, proto::Goodbye{a->id()}), "goodbye as A");
  expect_denied(Ask<proto::SliceInfo>(bob, rm, proto::CreateSlice{a->id(), 1, "", ""}),
                "a slice for A");
  const std::string scheduler = Endpoint("scheduler-island0", "endpoint");
  proto::SubmitProgram as_a;
  as_a.client_id = a->id();
  as_a.run_id = proto::MakeRunId(a->id(), 999);
  expect_denied(Ask<proto::SubmitReply>(bob, scheduler, as_a), "submit as A");
  auto on_a_slice = b->Submit(*a_program, {Tensor::F32({2}, {1, 2})});
  Status submitted = on_a_slice.ok() ? on_a_slice->Wait(20s).status() : on_a_slice.status();
  EXPECT_EQ(submitted.code(), Code::kPermissionDenied) << submitted.ToString();
  EXPECT_THAT(submitted.message(), HasSubstr("may not call function"));

  // A's object and A's runs are untouched.
  auto read = Ask<proto::GetObjectReply>(alice, store, proto::GetObject{object, 0, 0, true});
  ASSERT_THAT(read, IsOk());
  ExpectRunsCorrectly(*a, *a_program);
  auto b_program = Doubling(*b);
  ASSERT_THAT(b_program, IsOk());
  ExpectRunsCorrectly(*b, *b_program);
}

// A client's last releases and its goodbye to the RM travel on different sockets: the RM's
// notice that it left can reach a store first. The store then collects what the client
// left, or the release frees it, whichever comes first, and no error event says otherwise.
TEST_F(SecurityTest, AReleaseThatArrivesAfterItsOwnerLeftIsCarriedOutQuietly) {
  auto a = ConnectAs("alice");
  ASSERT_TRUE(a);
  net::KeyedContext alice(ClientKey(KeysDir(), "alice"));
  EventRecorder events(EventsEndpoint());
  const std::string store = Endpoint("objectstore-i0h0", "endpoint");
  const uint64_t object = proto::MakeObjectId(a->id(), uint64_t{1} << 38);
  ASSERT_THAT(Ask<proto::Ok>(alice, store, proto::PutObject{object, 0, a->id(), DType::kF32, {1}},
                             Bytes({5})),
              IsOk());
  ASSERT_THAT(Ask<proto::Ok>(alice, RmEndpoint(), proto::Goodbye{a->id()}), IsOk());

  auto released = Ask<proto::Ok>(alice, store, proto::ReleaseObject{object, a->id(), 1});
  EXPECT_THAT(released, IsOk());
  // Read until the store frees it; no error event may come on the way.
  bool freed = false;
  for (const auto deadline = std::chrono::steady_clock::now() + 10s;
       !freed && std::chrono::steady_clock::now() < deadline;) {
    auto e = events.Next(100ms);
    if (!e) continue;
    EXPECT_NE(e->topic.rfind("error.", 0), 0u) << e->topic << " " << e->fields.dump();
    freed = (e->topic == "object.freed" && e->fields.value("object", uint64_t{0}) == object) ||
            (e->topic == "object.collected" && e->fields.value("client", uint64_t{0}) == a->id());
  }
  EXPECT_TRUE(freed) << "object " << object << " was neither released nor collected";
}

// Checkpoints are a client key's own: each key has its own directory below a store's root,
// and a client saves only its own objects, as itself.
TEST_F(SecurityTest, CheckpointsAreTheirClientKeysOwn) {
  auto a = ConnectAs("alice");
  auto b = ConnectAs("bob");
  ASSERT_TRUE(a && b);
  auto a_program = Doubling(*a);
  ASSERT_THAT(a_program, IsOk());
  auto run = a->Submit(*a_program, {Tensor::F32({2}, {1, 2})});
  ASSERT_THAT(run, IsOk());
  const Status saved = a->Save({{"y", run->Output(0)}}, "secret");
  ASSERT_THAT(saved, IsOk());
  EXPECT_TRUE(std::filesystem::exists(cluster_->checkpoint_root() + "/alice/secret/index.json"));

  // B sees its own directory, not A's, and may not act as A nor save A's objects.
  auto b_slice = b->CreateSlice(1);
  ASSERT_THAT(b_slice, IsOk());
  EXPECT_EQ(b->Load("secret", *b_slice).status().code(), Code::kNotFound);
  net::KeyedContext bob(ClientKey(KeysDir(), "bob"));
  auto expect_denied = [](const auto& result, const std::string& what) {
    EXPECT_EQ(result.status().code(), Code::kPermissionDenied)
        << what << ": " << result.status().ToString();
  };
  const std::string store = Endpoint("objectstore-i0h0", "endpoint");
  expect_denied(
      Ask<proto::CheckpointIndexText>(bob, store, proto::ReadCheckpointIndex{a->id(), "secret"}),
      "read A's index");
  const uint64_t object = proto::MakeObjectId(a->id(), uint64_t{1} << 38);
  net::KeyedContext alice(ClientKey(KeysDir(), "alice"));
  ASSERT_THAT(Ask<proto::Ok>(alice, store, proto::PutObject{object, 0, a->id(), DType::kF32, {2}},
                             Bytes({7, 8})),
              IsOk());
  expect_denied(
      Ask<proto::SaveShardsReply>(
          bob, store, proto::SaveShards{a->id(), "stolen", {{object, 0, "y.0.t.npy"}}, {}}),
      "save as A");
  expect_denied(
      Ask<proto::SaveShardsReply>(
          bob, store, proto::SaveShards{b->id(), "stolen", {{object, 0, "y.0.t.npy"}}, {}}),
      "save A's object as itself");
  expect_denied(
      Ask<proto::Ok>(bob, store,
                     proto::LoadShards{b->id(), "secret", {{object + 1, 0, DType::kF32, {2}, {}}}}),
      "load into an object of A's");
  EXPECT_FALSE(std::filesystem::exists(cluster_->checkpoint_root() + "/bob/stolen"));
  EXPECT_FALSE(std::filesystem::exists(cluster_->checkpoint_root() + "/alice/stolen"));
}

TEST_F(SecurityTest, OnlyMembersSendTuplesAndStoreWrites) {
  auto b = ConnectAs("bob");
  ASSERT_NE(b, nullptr);
  net::KeyedContext bob(ClientKey(KeysDir(), "bob"));
  // Executors accept no client key at all: the handshake is refused.
  for (const char* key : {"data", "control"}) {
    auto sent = Ask<proto::Ok>(bob, Endpoint("executor-i0h0", key), proto::TupleBatch{});
    EXPECT_EQ(sent.status().code(), Code::kPermissionDenied)
        << key << ": " << sent.status().ToString();
  }
  // Stores take reservations and seals only from members, even for the client's own objects.
  const std::string store = Endpoint("objectstore-i0h0", "endpoint");
  const uint64_t own = proto::MakeObjectId(b->id(), uint64_t{1} << 39);
  auto reserved = Ask<proto::CreateObjectReply>(
      bob, store, proto::CreateObject{own, 0, b->id(), DType::kF32, {2}, 0});
  EXPECT_EQ(reserved.status().code(), Code::kPermissionDenied) << reserved.status().ToString();
  auto sealed = Ask<proto::Ok>(bob, store, proto::SealObject{own, 0, 0, ""});
  EXPECT_EQ(sealed.status().code(), Code::kPermissionDenied) << sealed.status().ToString();
  // A put into a device's memory is an executor's output: a client puts into the arena only.
  auto device_put = Ask<proto::Ok>(
      bob, store, proto::PutObject{own, 0, b->id(), DType::kF32, {2}, 0}, Bytes({1, 2}));
  EXPECT_EQ(device_put.status().code(), Code::kPermissionDenied) << device_put.status().ToString();
}

// A pinned read holds store memory until the reader gives its lease back, so only members
// (the host's executor, reading its arguments in place) pin and unpin.
TEST_F(SecurityTest, OnlyMembersPinStoreMemory) {
  auto b = ConnectAs("bob");
  ASSERT_NE(b, nullptr);
  net::KeyedContext bob(ClientKey(KeysDir(), "bob"));
  const std::string store = Endpoint("objectstore-i0h0", "endpoint");
  const uint64_t own = proto::MakeObjectId(b->id(), uint64_t{1} << 39);
  // The client's own object, read as clients read: not refused for the key (only unknown).
  auto read = Ask<proto::GetObjectReply>(bob, store, proto::GetObject{own, 0, 0, true, false});
  EXPECT_NE(read.status().code(), Code::kPermissionDenied) << read.status().ToString();
  EXPECT_NE(read.status().code(), Code::kOk);
  auto pinned = Ask<proto::GetObjectReply>(bob, store, proto::GetObject{own, 0, 0, true, true});
  EXPECT_EQ(pinned.status().code(), Code::kPermissionDenied) << pinned.status().ToString();
  EXPECT_THAT(pinned.status().message(), HasSubstr("pin store memory"));
  auto unpinned = Ask<proto::Ok>(bob, store, proto::UnpinObjects{1, {1}});
  EXPECT_EQ(unpinned.status().code(), Code::kPermissionDenied) << unpinned.status().ToString();
}

TEST_F(SecurityTest, ObjectsOfClientsThatAreNotConnectedAreNeverCreated) {
  net::KeyedContext bob(ClientKey(KeysDir(), "bob"));
  const uint64_t ghost = 1'000'000;
  auto put = Ask<proto::Ok>(
      bob, Endpoint("objectstore-i0h0", "endpoint"),
      proto::PutObject{proto::MakeObjectId(ghost, 1), 0, ghost, DType::kF32, {2}}, Bytes({1, 2}));
  EXPECT_EQ(put.status().code(), Code::kNotFound) << put.status().ToString();
  EXPECT_THAT(put.status().message(), HasSubstr("not connected"));
}

TEST_F(SecurityTest, AStrayMessageNamingTheNextClientsIdDoesNotLockThatClientOut) {
  // A message naming an id the RM has not given out yet is refused as not connected; the
  // client that then gets that id is served. (The wire fuzz test once found a store that
  // remembered the first answer and refused the real client for good.)
  auto alice = ConnectAs("alice");
  ASSERT_NE(alice, nullptr);
  const uint64_t next = alice->id() + 1;
  const std::string store = Endpoint("objectstore-i0h0", "endpoint");
  net::KeyedContext bob(ClientKey(KeysDir(), "bob"));
  auto put = [&] {
    return Ask<proto::Ok>(bob, store,
                          proto::PutObject{proto::MakeObjectId(next, 1), 0, next, DType::kF32, {2}},
                          Bytes({1, 2}));
  };
  auto early = put();
  EXPECT_EQ(early.status().code(), Code::kNotFound) << early.status().ToString();
  auto b = ConnectAs("bob");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->id(), next) << "another client took the id this test named";
  auto served = put();
  EXPECT_THAT(served, IsOk());
}

TEST_F(SecurityTest, AGoodbyeNamingTheNextClientsIdDoesNotTurnThatClientAway) {
  // A goodbye is its client's own, so even a member's must name a client the RM gave out:
  // the wire fuzz test once had a store take a member's stray goodbye for the id the next
  // client then got, and refuse that client's outputs as said goodbye, its run hanging.
  auto alice = ConnectAs("alice");
  ASSERT_NE(alice, nullptr);
  const uint64_t next = alice->id() + 1;
  const std::string store = Endpoint("objectstore-i0h0", "endpoint");
  MemberContext member;
  for (const std::string& peer : {store, Endpoint("scheduler-island0", "endpoint")}) {
    auto early = Ask<proto::Ok>(member, peer, proto::Goodbye{next});
    EXPECT_EQ(early.status().code(), Code::kNotFound) << peer << ": " << early.status().ToString();
  }
  auto b = ConnectAs("bob");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->id(), next) << "another client took the id this test named";
  net::KeyedContext bob(ClientKey(KeysDir(), "bob"));
  auto put = Ask<proto::Ok>(
      bob, store, proto::PutObject{proto::MakeObjectId(next, 1), 0, next, DType::kF32, {2}},
      Bytes({1, 2}));
  EXPECT_THAT(put, IsOk());
}

TEST_F(SecurityTest, ARunWhoseOutputsAStoreRefusesFailsSayingWhyNotAtItsTimeout) {
  // A faulty member says goodbye for a connected client at every store: the stores refuse
  // its outputs as said goodbye. Its scheduler cancelled nothing, so it passes the shards'
  // Cancelled on to the client, who would otherwise wait for shards never written.
  auto alice = ConnectAs("alice");
  ASSERT_NE(alice, nullptr);
  auto program = Doubling(*alice);
  ASSERT_THAT(program, IsOk());
  MemberContext member;
  for (const auto& p : cluster_->info().processes) {
    if (p.role != "objectstore") continue;
    auto bye = Ask<proto::Ok>(member, p.endpoints.at("endpoint"), proto::Goodbye{alice->id()});
    ASSERT_THAT(bye, IsOk()) << p.name << ": " << bye.status().ToString();
  }
  auto run = alice->Submit(*program, {Tensor::F32({2}, {1, 2})});
  ASSERT_THAT(run, IsOk());
  auto out = run->Wait(15s);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Code::kCancelled) << out.status().ToString();
  EXPECT_THAT(out.status().message(), HasSubstr("said goodbye"));
}

TEST_F(SecurityTest, ObjectsOfAClientThatLeftAreRefusedAsCancelledNotUnknown) {
  // An executor reserving the output of a shard admitted just before its client left: the
  // refusal says the client left (Cancelled, as the shard's cancel does), not that the
  // client is unknown (NotFound), which would read as a fault.
  auto alice = ConnectAs("alice");
  ASSERT_NE(alice, nullptr);
  const uint64_t left = alice->id();
  alice.reset();
  MemberContext member;
  auto reserved = Ask<proto::CreateObjectReply>(
      member, Endpoint("objectstore-i0h0", "endpoint"),
      proto::CreateObject{proto::MakeObjectId(left, 1), 0, left, DType::kF32, {2}, 0});
  EXPECT_EQ(reserved.status().code(), Code::kCancelled) << reserved.status().ToString();
  EXPECT_THAT(reserved.status().message(), HasSubstr("has left the cluster"));
  // A goodbye that comes late (the RM dropped the client first) is taken, whoever sends it:
  // nothing of the client's is left to protect.
  net::KeyedContext bob(ClientKey(KeysDir(), "bob"));
  auto late = Ask<proto::Ok>(bob, Endpoint("objectstore-i0h0", "endpoint"), proto::Goodbye{left});
  EXPECT_THAT(late, IsOk());
}

TEST_F(SecurityTest, ReadersOfAShardThatWillNeverBeWrittenAreAnsweredAtOnce) {
  // A reader waits for a shard that then cannot be written: its reservation is refused (the
  // owner is not connected), or its seal names a shard this store never reserved (one a
  // store process before a restart did). The reader hears so then, not when its own minute
  // runs out. One connection, so that the store sees the read first.
  MemberContext member;
  zmq::socket_t socket = net::MakeSocket(member, zmq::socket_type::dealer);
  ASSERT_THAT(net::Connect(socket, Endpoint("objectstore-i0h0", "endpoint")), IsOk());
  uint64_t next_request = 1;
  auto send = [&](const auto& body) {
    net::Frames frames;
    frames.push_back(proto::EncodeHeader(next_request++, body));
    return net::SendFrames(socket, frames);
  };
  // The error answers to the requests sent so far, by request id.
  std::map<uint64_t, Status> answers;
  auto await_answers = [&] {
    while (answers.size() + 1 < next_request) {
      auto frames = net::RecvFrames(socket, 10s);
      ASSERT_TRUE(frames.ok() && frames->has_value()) << "answers so far: " << answers.size();
      auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/false);
      ASSERT_THAT(in, IsOk());
      ASSERT_EQ(in->header.kind(), proto::Kind::kError);
      answers[in->header.request_id()] = proto::FromError(*in->header.As<proto::Error>());
    }
  };
  const uint64_t ghost = 1'000'001;
  const uint64_t refused = proto::MakeObjectId(ghost, 1);
  ASSERT_THAT(send(proto::GetObject{refused, 0, 60'000, false}), IsOk());
  ASSERT_THAT(send(proto::CreateObject{refused, 0, ghost, DType::kF32, {2}, 0}), IsOk());
  const uint64_t orphan = proto::MakeObjectId(ghost, 2);
  ASSERT_THAT(send(proto::GetObject{orphan, 0, 60'000, false}), IsOk());
  ASSERT_THAT(send(proto::SealObject{orphan, 0, 0, ""}), IsOk());
  await_answers();
  if (HasFatalFailure()) return;
  EXPECT_EQ(answers[2].code(), Code::kNotFound) << answers[2].ToString();
  EXPECT_EQ(answers[1].code(), Code::kCancelled) << answers[1].ToString();
  EXPECT_THAT(answers[1].message(), HasSubstr("will not be created"));
  EXPECT_EQ(answers[4].code(), Code::kNotFound) << answers[4].ToString();
  EXPECT_EQ(answers[3].code(), Code::kCancelled) << answers[3].ToString();
  EXPECT_THAT(answers[3].message(), HasSubstr("will not be sealed here"));
}

}  // namespace
}  // namespace atl::testing
