// Every service answers garbage, truncated messages and requests naming unknown ids with
// an error, and keeps serving afterwards.
#include <string>
#include <vector>

#include "common/net/transport.h"
#include "common/proto/codec.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/member_context.h"

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
    net::Requester rm(context_, cluster_->info().rm_endpoint);
    ASSERT_TRUE(rm.Connect().ok());
    auto hello = rm.Call<proto::HelloClientReply>(proto::HelloClient{"probe"}, 5s);
    ASSERT_TRUE(hello.ok()) << hello.status().ToString();
    client_id_ = hello->client_id;
    auto slice = rm.Call<proto::SliceInfo>(proto::CreateSlice{client_id_, 1, "", ""}, 5s);
    ASSERT_TRUE(slice.ok()) << slice.status().ToString();
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
    auto slice = client->CreateSlice(2);
    ASSERT_TRUE(slice.ok()) << slice.status().ToString();
    FunctionBuilder b("inc");
    b.Output(b.Add(b.Input(DType::kF32, {2}), 1.0));
    auto fn = client->Register(b, *slice);
    ASSERT_TRUE(fn.ok()) << fn.status().ToString();
    ProgramBuilder p;
    p.Return({p.Call(*fn, {p.Call(*fn, {p.Arg(DType::kF32, {2})})[0]})[0]});
    auto run = client->Submit(*p.Build(), {Tensor::F32({2}, {1, 2})});
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    auto out = run->Wait(20s);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->at(0), Tensor::F32({2}, {3, 4}));
  }

  MemberContext context_;
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
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = RawCall(context_, endpoints_.store, {Encoded(proto::GetObject{object, 0, 10000, true})});
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("31337"), std::string::npos) << s.ToString();
  ExpectStillServing();
}

}  // namespace
}  // namespace atl::testing
