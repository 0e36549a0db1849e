// Every service answers garbage, truncated messages and requests naming unknown ids with
// an error, and keeps serving afterwards; a flood of garbage is answered message by message
// but logged once per peer per second, with a count.
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/net/rejection_log.h"

#include "common/net/transport.h"
#include "common/proto/codec.h"
#include "common/proto/ids.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/member_context.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

struct Endpoints {
  std::string rm, scheduler, control, data, store;
};

// Sends raw frames from a fresh DEALER and returns the status carried by the reply.
Status RawCall(zmq::context_t& context, const std::string& endpoint,
               std::vector<std::string> frames) {
  zmq::socket_t socket = net::MakeSocket(context, zmq::socket_type::dealer);
  ATOLL_RETURN_IF_ERROR(net::Connect(socket, endpoint));
  net::Frames out;
  for (const auto& f : frames) out.emplace_back(f.data(), f.size());
  ATOLL_RETURN_IF_ERROR(net::SendFrames(socket, out));
  ATOLL_ASSIGN_OR_RETURN(auto reply, net::RecvFrames(socket, 5s));
  if (!reply) return DeadlineExceeded("no reply from " + endpoint);
  ATOLL_ASSIGN_OR_RETURN(auto in, proto::ParseIncoming(std::move(*reply), false));
  if (in.header.kind() != proto::Kind::kError) return Status::Ok();
  ATOLL_ASSIGN_OR_RETURN(auto error, in.header.As<proto::Error>());
  return proto::FromError(error);
}

std::string Encoded(const auto& body) { return proto::EncodeHeader(1, body).to_string(); }

class BadInputTest : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    // A real client, heartbeating on its own: one that only said hello would be dropped
    // once its liveness window passed, and a loaded machine gets there within a test.
    probe_ = Connect("probe");
    ASSERT_NE(probe_, nullptr);
    client_id_ = probe_->id();
    net::Requester rm(context_, cluster_->info().rm_endpoint);
    ASSERT_THAT(rm.Connect(), IsOk());
    auto slice = rm.Call<proto::SliceInfo>(proto::CreateSlice{client_id_, 1, "", ""}, 5s);
    ASSERT_THAT(slice, IsOk());
    const auto& device = slice->devices.at(0);
    endpoints_ = {cluster_->info().rm_endpoint, slice->scheduler_endpoint, device.control_endpoint,
                  device.data_endpoint, device.store_endpoint};
  }

  std::vector<std::pair<std::string, std::string>> All() const {
    return {{"rm", endpoints_.rm},
            {"scheduler", endpoints_.scheduler},
            {"executor control", endpoints_.control},
            {"executor data", endpoints_.data},
            {"objectstore", endpoints_.store}};
  }

  // The whole cluster still works: the Figure 2 style chain runs to the right answer.
  void ExpectStillServing() {
    auto client = Connect("after-bad-input");
    ASSERT_NE(client, nullptr);
    ExpectChainRuns(*client, 2, "");
  }

  // inc(inc(x)) gives x + 2 for `client` on a new slice of `devices` (on `island`, or
  // anywhere when empty).
  static void ExpectChainRuns(Client& client, uint32_t devices, const std::string& island) {
    auto slice = client.CreateSlice(devices, island);
    ASSERT_THAT(slice, IsOk());
    FunctionBuilder b("inc");
    b.Output(b.Add(b.Input(DType::kF32, {2}), 1.0));
    auto fn = client.Register(b, *slice);
    ASSERT_THAT(fn, IsOk());
    ProgramBuilder p;
    p.Return({p.Call(*fn, {p.Call(*fn, {p.Arg(DType::kF32, {2})})[0]})[0]});
    auto run = client.Submit(*p.Build(), {Tensor::F32({2}, {1, 2})});
    ASSERT_THAT(run, IsOk());
    auto out = run->Wait(20s);
    ASSERT_THAT(out, IsOk());
    EXPECT_EQ(out->at(0), Tensor::F32({2}, {3, 4}));
  }

  MemberContext context_;
  std::unique_ptr<Client> probe_;
  uint64_t client_id_ = 0;
  Endpoints endpoints_;
};

TEST_F(BadInputTest, GarbageGetsAnErrorReplyFromEveryService) {
  for (const auto& [name, endpoint] : All()) {
    Status s = RawCall(context_, endpoint, {"\xc1\xff garbage \x00\x01"});
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << name << ": " << s.ToString();
  }
  ExpectStillServing();
}

TEST_F(BadInputTest, TruncatedMessagesGetAnErrorReplyFromEveryService) {
  const std::string whole = Encoded(proto::CreateSlice{client_id_, 1, "", ""});
  for (const auto& [name, endpoint] : All()) {
    for (size_t cut : {size_t{1}, whole.size() / 2, whole.size() - 1}) {
      Status s = RawCall(context_, endpoint, {whole.substr(0, cut)});
      EXPECT_EQ(s.code(), Code::kInvalidArgument) << name << " cut at " << cut;
    }
  }
  ExpectStillServing();
}

TEST_F(BadInputTest, MessagesOfTheWrongKindGetAnErrorReply) {
  for (const auto& [name, endpoint] : All()) {
    Status s = RawCall(context_, endpoint, {Encoded(proto::StoreStats{})});
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << name << ": " << s.ToString();
  }
  ExpectStillServing();
}

TEST_F(BadInputTest, UnknownIdsAreNamedInTheError) {
  // RM: unknown client, slice.
  Status s = RawCall(context_, endpoints_.rm, {Encoded(proto::CreateSlice{999999, 1, "", ""})});
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  s = RawCall(context_, endpoints_.rm,
              {Encoded(proto::RegisterFunction{client_id_, 424242, ir::FunctionDef{}})});
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("424242"), std::string::npos) << s.ToString();
  // Object store: unknown object.
  s = RawCall(context_, endpoints_.store, {Encoded(proto::GetObject{777777, 0, 0, true})});
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  s = RawCall(context_, endpoints_.store, {Encoded(proto::ReleaseObject{777777})});
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  // Scheduler: a subgraph whose shard numbering is impossible.
  proto::Entry bad;
  bad.run_id = 5;
  bad.shard = 3;
  bad.num_shards = 2;
  s = RawCall(context_, endpoints_.scheduler,
              {Encoded(proto::SubmitProgram{client_id_, 5, {{endpoints_.control, bad}}, 1.0, {}})});
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  // Executor data plane: a batch whose headers and frames do not match.
  s = RawCall(context_, endpoints_.data,
              {Encoded(proto::TupleBatch{{proto::TupleHeader{}, proto::TupleHeader{}}}), "x"});
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  ExpectStillServing();
}

// The rejections from `peer` that the services' logs report: the sum of the counts of every
// line naming it, and how many lines.
struct LoggedRejections {
  uint64_t messages = 0;
  int lines = 0;
};
LoggedRejections RejectionsInLogs(const std::string& logs_dir, const std::string& peer) {
  const std::regex line_re("rejected ([0-9]+) messages? from " + peer + "[: ]");
  LoggedRejections found;
  for (const auto& entry : std::filesystem::directory_iterator(logs_dir)) {
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, line_re)) continue;
      found.messages += std::stoull(m[1].str());
      ++found.lines;
    }
  }
  return found;
}

TEST_F(BadInputTest, AFloodOfGarbageIsAnsweredEachTimeButLoggedOncePerSecondWithACount) {
  constexpr int kRounds = 10;
  constexpr int kPerRound = 200;  // under every socket's high-water mark
  const std::string logs = *state_dir_ + "/logs";
  const auto services = All();
  for (size_t s = 0; s < services.size(); ++s) {
    const auto& [name, endpoint] = services[s];
    SCOPED_TRACE(name);
    // A routing id of our choosing (short: a long one is cut short in the log), so that the
    // logs' lines about this peer can be found.
    const std::string id = "flood" + std::to_string(s);
    const std::string peer = "peer " + net::HexBytes(id);
    zmq::socket_t dealer = net::MakeSocket(context_, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::routing_id, id);
    ASSERT_THAT(net::Connect(dealer, endpoint), IsOk());
    const auto start = std::chrono::steady_clock::now();
    int replies = 0;
    for (int round = 0; round < kRounds; ++round) {
      for (int i = 0; i < kPerRound; ++i) {
        net::Frames garbage;
        garbage.emplace_back("\xc1\xff garbage", 10);
        ASSERT_THAT(net::SendFrames(dealer, garbage), IsOk());
      }
      for (int i = 0; i < kPerRound; ++i) {
        auto reply = net::RecvFrames(dealer, 10s);
        ASSERT_TRUE(reply.ok() && reply->has_value()) << "reply " << replies << " missing";
        ++replies;
      }
    }
    const double flood_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(replies, kRounds * kPerRound);
    // Once a whole interval has passed, one more rejection logs the count of all before it.
    std::this_thread::sleep_for(1100ms);
    net::Frames last;
    last.emplace_back("\xc1\xff garbage", 10);
    ASSERT_THAT(net::SendFrames(dealer, last), IsOk());
    auto reply = net::RecvFrames(dealer, 10s);
    ASSERT_TRUE(reply.ok() && reply->has_value());
    const uint64_t sent = kRounds * kPerRound + 1;
    // The service writes the line as it replies: wait for it, bounded.
    LoggedRejections logged;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while ((logged = RejectionsInLogs(logs, peer)).messages < sent &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
    }
    EXPECT_EQ(logged.messages, sent) << "every rejection counted once, in some line";
    // The first at once, then at most one line per second of flood, and the last count.
    EXPECT_GE(logged.lines, 2);
    EXPECT_LE(logged.lines, 3 + static_cast<int>(flood_s)) << "flood took " << flood_s << " s";
  }
  ExpectStillServing();
}

TEST_F(BadInputTest, APeerThatNeverReadsItsRepliesDoesNotStallAServiceForOthers) {
  // Far more requests than the queues between a service and this peer hold (a thousand
  // messages each way by default; this peer takes at most one): were the service to wait
  // for room, it would wait on every further reply and answer nobody else meanwhile.
  constexpr int kUnread = 4000;
  for (const auto& [name, endpoint] : All()) {
    SCOPED_TRACE(name);
    zmq::socket_t mute = net::MakeSocket(context_, zmq::socket_type::dealer);
    mute.set(zmq::sockopt::rcvhwm, 1);
    ASSERT_THAT(net::Connect(mute, endpoint), IsOk());
    int sent = 0;
    for (; sent < kUnread; ++sent) {
      net::Frames garbage;
      garbage.emplace_back("\xc1\xff garbage", 10);
      if (!net::SendFrames(mute, garbage).ok()) break;  // the service stopped reading: fails below
    }
    // Another peer's request behind all of those is still answered.
    Status s = RawCall(context_, endpoint, {"\xc1\xff garbage \x00\x01"});
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_EQ(sent, kUnread);
  }
  ExpectStillServing();
}

TEST_F(BadInputTest, AProgramNamingAnUnknownFunctionFailsWithThatError) {
  // A well-formed program whose only node calls a function nobody registered: the
  // executor seals the result with the error, and a reader of the result gets it.
  const uint64_t run = (client_id_ << 32) | 77;
  const uint64_t object = (client_id_ << 40) | 77;
  proto::Entry e;
  e.run_id = run;
  e.function_id = 31337;
  e.num_shards = 1;
  e.owner_client = client_id_;
  e.outputs = {{{proto::OutputDest::kStore, "", 0, 0, 0, object, {}}}};
  Status s =
      RawCall(context_, endpoints_.scheduler,
              {Encoded(proto::SubmitProgram{client_id_, run, {{endpoints_.control, e}}, 1.0, {}})});
  ASSERT_THAT(s, IsOk());
  s = RawCall(context_, endpoints_.store, {Encoded(proto::GetObject{object, 0, 10000, true})});
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("31337"), std::string::npos) << s.ToString();
  ExpectStillServing();
}

// Client ids are handed out in order, so a stray message can name the next client's id
// before that client exists. A scheduler that queued such a submission, even a member's,
// kept it in the queue the real client later got: a run held for its cross-island producers
// (which never come) held every run of that client on the island for cross_island_wait_ms.
TEST_F(BadInputTest, ASubmissionForAClientNotConnectedYetIsRefusedAndHoldsUpNobody) {
  net::Requester rm(context_, endpoints_.rm);
  ASSERT_THAT(rm.Connect(), IsOk());
  auto status = rm.Call<proto::ClusterStatus>(proto::GetClusterStatus{}, 5s);
  ASSERT_THAT(status, IsOk());
  const uint64_t next = client_id_ + 1;  // no other client connects meanwhile
  proto::Entry held;
  held.run_id = proto::MakeRunId(next, 1);
  held.node = 1;
  held.num_shards = 1;
  held.owner_client = next;
  // Fed by node 0 on another island, which nobody places: held in its client's queue.
  const proto::CrossIslandNode fed{1, {0}, {}};
  for (const auto& island : status->islands) {
    // Neither a release of another island's node for its run is kept, nor the run queued.
    Status s = RawCall(context_, island.scheduler_endpoint,
                       {Encoded(proto::NodeReleased{held.run_id, 0})});
    EXPECT_EQ(s.code(), Code::kNotFound) << island.name << ": " << s.ToString();
    s = RawCall(context_, island.scheduler_endpoint,
                {Encoded(proto::SubmitProgram{
                    next, held.run_id, {{endpoints_.control, held}}, 1.0, {fed}})});
    EXPECT_EQ(s.code(), Code::kNotFound) << island.name << ": " << s.ToString();
    EXPECT_NE(s.message().find(std::to_string(next)), std::string::npos) << s.ToString();
  }
  // The client that gets that id runs on every island as any other.
  auto client = Connect("next");
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(client->id(), next);
  for (const auto& island : status->islands) {
    SCOPED_TRACE(island.name);
    ExpectChainRuns(*client, 1, island.name);
  }
}

}  // namespace
}  // namespace atl::testing
