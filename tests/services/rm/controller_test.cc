// The RM's controller, registrations and functions: executors join with their devices
// numbered cluster-wide, a rejoining executor is back and one that restarted is lost first,
// clients come and go, slices are placed only where a scheduler lives, and a function's
// registration is answered once every executor of its slice compiled it (or one failed, or
// the compile timeout passed). What would be sent is read from the returned actions.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/services/rm/controller_fixture.h"

namespace atl::rm {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST_F(ControllerTest, ExecutorsJoinWithTheirDevicesNumberedClusterWide) {
  RmActions a0 = RegisterHost("a0");
  RmActions a1 = RegisterHost("a1", 3);
  auto reply = std::get<proto::RegisterExecutorReply>(Replies(a1).at(0));
  EXPECT_THAT(reply.device_ids, ElementsAre(2, 3, 4));
  EXPECT_EQ(reply.heartbeat_ms, kHeartbeatMs);
  EXPECT_THAT(reply.functions_coming, IsEmpty());
  EXPECT_THAT(a1.Topics(),
              ElementsAre("device.registered", "device.registered", "device.registered"));
  EXPECT_EQ(rm_.state().devices.at(3).host, "a1");
  // The registration is written before it is answered.
  const size_t written =
      IndexOf(a0, [](const RmAction& a) { return std::holds_alternative<WriteStateAction>(a); });
  const size_t replied =
      IndexOf(a0, [](const RmAction& a) { return std::holds_alternative<ReplyAction>(a); });
  EXPECT_LT(written, replied);
}

TEST_F(ControllerTest, AnIslandNotConfiguredJoinsWithItsFirstExecutor) {
  proto::RegisterExecutor b0 = Executor("b0");
  b0.island = "b";
  RmActions joined = Ok(rm_.RegisterExecutor(b0, From("exec-b0"), now_));
  EXPECT_EQ(FieldOf(joined, "island.joined", "island"), "b");
  b0.host = "b1";
  RmActions second = Ok(rm_.RegisterExecutor(b0, From("exec-b1"), now_));
  EXPECT_THAT(second.Topics(), ElementsAre("device.registered", "device.registered"));
}

TEST_F(ControllerTest, AnExecutorIsRefusedWhatItCannotBe) {
  RegisterHost("a0");
  EXPECT_THAT(rm_.RegisterExecutor(Executor("a0", 3), From("exec-a0"), now_),
              StatusIs(Code::kInvalidArgument, "re-registered with 3 devices, had 2"));
  proto::RegisterExecutor wildcard = Executor("a1");
  wildcard.data_endpoint = "tcp://*:5";
  EXPECT_THAT(rm_.RegisterExecutor(wildcard, From("exec-a1"), now_),
              StatusIs(Code::kInvalidArgument, "its data endpoint"));
  EXPECT_THAT(rm_.RegisterExecutor(Executor("a2", 0), From("exec-a2"), now_),
              StatusIs(Code::kInvalidArgument, "no devices"));
  EXPECT_EQ(rm_.state().hosts.count("a1"), 0u);
}

TEST_F(ControllerTest, SlicesArePlacedOnlyWhereASchedulerLives) {
  RegisterHost("a0");
  const uint64_t client = Hello();
  EXPECT_THAT(rm_.CreateSlice({client, 1, "", ""}, From("client"), now_),
              StatusIs(Code::kFailedPrecondition, "has live devices but no live scheduler"));
  EXPECT_THAT(rm_.CreateSlice({client, 1, "a", ""}, From("client"), now_),
              StatusIs(Code::kUnavailable, "island 'a' has no live scheduler yet"));
  RegisterScheduler();
  const proto::SliceInfo slice = CreateSlice(client, 2);
  EXPECT_EQ(slice.scheduler_endpoint, "tcp://sched:1");
  EXPECT_EQ(rm_.state().devices.at(slice.devices[0].device_id).slices, 1u);
}

TEST_F(ControllerTest, AClientIsToldToStoresAndSchedulersBeforeItHearsItsId) {
  StartCluster();
  RmActions hello = Ok(rm_.HelloClient({"test"}, From("client"), now_));
  const auto told = hello.Sent<proto::OwnersKnown>();
  ASSERT_EQ(told.size(), 4u);  // three stores, one scheduler
  EXPECT_THAT(told[0].clients, ElementsAre(1));
  EXPECT_TRUE(hello.state_changed);
  EXPECT_THAT(hello.Topics(), ElementsAre("client.connected"));
}

TEST_F(ControllerTest, AClientThatLeftLearnsWhyAtItsNextCall) {
  StartCluster();
  const uint64_t client = Hello();
  const proto::SliceInfo slice = CreateSlice(client, 2);
  RmActions bye = Ok(rm_.Goodbye({client}, From("client"), now_));
  EXPECT_THAT(bye.Topics(), ElementsAre("slice.released", "client.gone"));
  EXPECT_EQ(rm_.state().slices.count(slice.slice_id), 0u);
  EXPECT_EQ(rm_.state().devices.at(slice.devices[0].device_id).slices, 0u);
  EXPECT_THAT(rm_.CreateSlice({client, 1, "", ""}, From("client"), now_),
              StatusIs(Code::kNotFound, "has left the cluster (goodbye)"));
  EXPECT_THAT(rm_.Goodbye({99}, From("client"), now_),
              StatusIs(Code::kNotFound, "say HelloClient"));
  const proto::Owners owners = rm_.LookupOwners({{client}, {}});
  EXPECT_THAT(owners.clients_alive, ElementsAre(false));
  EXPECT_THAT(owners.clients_gone_why, ElementsAre("goodbye"));
}

TEST_F(ControllerTest, OnlyAClientsOwnKeyOrAMemberMayActForIt) {
  StartCluster();
  Caller alice = From("alice");
  alice.sender = {"client:alice"};
  RmActions hello = Ok(rm_.HelloClient({"test"}, alice, now_));
  const uint64_t client = std::get<proto::HelloClientReply>(Replies(hello).at(0)).client_id;
  EXPECT_THAT(rm_.MayActFor({"client:alice"}, client, "create a slice"), IsOk());
  EXPECT_THAT(rm_.MayActFor({"member"}, client, "create a slice"), IsOk());
  EXPECT_THAT(rm_.MayActFor({"client:bob"}, client, "create a slice"),
              StatusIs(Code::kPermissionDenied,
                       fmt::format("create a slice: client {} is not the sender's", client)));
  // A client not connected passes here: the decision says why it is unknown.
  EXPECT_THAT(rm_.MayActFor({"client:bob"}, 99, "create a slice"), IsOk());
  EXPECT_THAT(rm_.CreateSlice({99, 1, "", ""}, From("bob"), now_),
              StatusIs(Code::kNotFound, "create a slice: client 99 is unknown"));
}

TEST_F(ControllerTest, ARegistrationIsAnsweredOnceEveryExecutorCompiled) {
  StartCluster();
  const uint64_t client = Hello();
  const proto::SliceInfo slice = CreateSlice(client, 2);
  Caller caller = From("client");
  RmActions sent = Ok(rm_.RegisterFunction({client, slice.slice_id, Doubling(2)}, caller, now_));
  const auto compiles = SendsOf<proto::Compile>(sent);
  ASSERT_EQ(compiles.size(), 2u);  // the slice spreads over two hosts
  EXPECT_NE(compiles[0].routing_id, compiles[1].routing_id);
  EXPECT_THAT(Replies(sent), IsEmpty());

  RmActions first = rm_.CompileAnswered(compiles[0].request_id, Status::Ok());
  EXPECT_TRUE(first.list.empty());
  RmActions second = rm_.CompileAnswered(compiles[1].request_id, Status::Ok());
  const auto replies = SendsOf<proto::RegisterFunctionReply>(second);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].routing_id, "client");
  EXPECT_EQ(replies[0].request_id, caller.request_id);
  EXPECT_THAT(second.Topics(), ElementsAre("function.registered"));
  // Saved before it is answered.
  EXPECT_TRUE(std::holds_alternative<AppendFunctionAction>(second.list.at(0)));
  // A late answer finds nothing waiting.
  EXPECT_TRUE(rm_.CompileAnswered(compiles[1].request_id, Status::Ok()).list.empty());
}

TEST_F(ControllerTest, OneFailedCompileFailsTheRegistration) {
  StartCluster();
  const uint64_t client = Hello();
  const proto::SliceInfo slice = CreateSlice(client, 2);
  RmActions sent =
      Ok(rm_.RegisterFunction({client, slice.slice_id, Doubling(2)}, From("client"), now_));
  const uint64_t request = SendsOf<proto::Compile>(sent).at(0).request_id;
  RmActions failed = rm_.CompileUnsent(request, Unavailable("host unreachable"));
  const auto errors = SendsOf<proto::Error>(failed);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(std::get<proto::Error>(errors[0].message).message, HasSubstr("host unreachable"));
  EXPECT_THAT(failed.Topics(), ElementsAre("error.rm"));
  EXPECT_TRUE(rm_.state().functions.empty());
}

TEST_F(ControllerTest, ARegistrationNotCompiledInTimeFails) {
  StartCluster();
  const uint64_t client = Hello();
  const proto::SliceInfo slice = CreateSlice(client, 2);
  Ok(rm_.RegisterFunction({client, slice.slice_id, Doubling(2)}, From("client"), now_));
  const RmActions waiting = Advance(900ms, {}, {client});
  EXPECT_THAT(waiting.Topics(), IsEmpty());
  EXPECT_THAT(SendsOf<proto::Error>(waiting), IsEmpty());  // only the tables of live clients
  RmActions late = Advance(200ms, {}, {client});
  const auto errors = SendsOf<proto::Error>(late);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(std::get<proto::Error>(errors[0].message).message,
              HasSubstr("did not compile within 1 s"));
  EXPECT_EQ(rm_.pending().registrations(), 0u);
}

TEST_F(ControllerTest, AFunctionMustFitItsOwnSlice) {
  StartCluster();
  const uint64_t client = Hello();
  const uint64_t other = Hello("other");
  const proto::SliceInfo slice = CreateSlice(client, 2);
  EXPECT_THAT(rm_.RegisterFunction({other, slice.slice_id, Doubling(2)}, From("other"), now_),
              StatusIs(Code::kFailedPrecondition, "belongs to client 1, not 2"));
  EXPECT_THAT(rm_.RegisterFunction({client, slice.slice_id, Doubling(3)}, From("client"), now_),
              StatusIs(Code::kInvalidArgument, "function 'double'"));
  EXPECT_THAT(rm_.RegisterFunction({client, 42, Doubling(2)}, From("client"), now_),
              StatusIs(Code::kNotFound, "slice 42 is unknown"));
}

TEST_F(ControllerTest, ARestartedExecutorIsLostThenBackWithItsFunctionsCompiledAgain) {
  StartCluster();
  const uint64_t client = Hello();
  // On every device: nowhere to move to, it keeps the restarted host's devices.
  const proto::SliceInfo slice = CreateSlice(client, 6);
  const uint64_t function = RegisterFunction(client, slice);
  const std::string host = slice.devices[0].host;

  RmActions again = RegisterHost(host);
  EXPECT_THAT(again.Topics(), Contains("error.rm"));  // the remap that found no device
  EXPECT_THAT(FieldOf(again, "host.lost", "reason"), HasSubstr("its executor restarted"));
  const auto reply = std::get<proto::RegisterExecutorReply>(Replies(again).at(0));
  EXPECT_THAT(reply.functions_coming, ElementsAre(function));
  // The function compiles on it again after the reply, and only then is it back.
  const size_t replied =
      IndexOf(again, [](const RmAction& a) { return std::holds_alternative<ReplyAction>(a); });
  const size_t compiled = IndexOf(again, [&](const RmAction& a) {
    const auto* send = std::get_if<SendAction>(&a);
    return send != nullptr && send->routing_id == "exec-" + host &&
           std::holds_alternative<proto::Compile>(send->message);
  });
  EXPECT_LT(replied, compiled);
  ASSERT_LT(compiled, again.list.size());
  const auto topics = again.Topics();
  ASSERT_FALSE(topics.empty());
  EXPECT_EQ(topics.back(), "host.back");
  EXPECT_TRUE(rm_.state().hosts.at(host).alive);
}

TEST_F(ControllerTest, CompilesForAnExecutorNotYetReconnectedWaitForIt) {
  StartCluster();
  const uint64_t client = Hello();
  const proto::SliceInfo slice = CreateSlice(client, 2);
  RegisterFunction(client, slice);
  // A restarted RM: connections are unknown until each executor is heard again.
  RmState saved = rm_.state();
  for (auto& [name, host] : saved.hosts) host.routing_id.clear();
  Controller restarted(Options(), MakeSpreadEvenlyPolicy(), now_);
  restarted.Restore(saved, now_);
  RmActions sent =
      Ok(restarted.RegisterFunction({client, slice.slice_id, Doubling(2)}, From("client"), now_));
  EXPECT_TRUE(SendsOf<proto::Compile>(sent).empty());
  RmActions beat = Ok(restarted.Heartbeat(
      {proto::Heartbeat::kExecutor, slice.devices[0].host, 0, 0}, From("new-connection"), now_));
  const auto held = SendsOf<proto::Compile>(beat);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].routing_id, "new-connection");
}

}  // namespace
}  // namespace atl::rm
