// The RM's controller over time, on a clock moved by hand: services silent for the lapse
// are lost and back when heard again, silent clients are dropped, a restarted RM judges
// nobody before the reconnect grace, and the slices on a lost or drained host are remapped,
// their clients told (and a drain answered) once their functions compiled there.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/services/rm/controller_fixture.h"

namespace atl::rm {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

TEST_F(ControllerTest, AnExecutorSilentPastTheLapseIsLostAndBackWhenHeard) {
  StartCluster();
  const uint64_t client = Hello();
  EXPECT_THAT(Advance(kLapse, {"a0"}, {client}).Topics(), IsEmpty());
  RmActions lost = Advance(100ms, {"a0"}, {client});
  EXPECT_THAT(lost.Topics(), ElementsAre("host.lost"));
  EXPECT_THAT(FieldOf(lost, "host.lost", "reason"),
              HasSubstr("devices 0,1 on host a0 were lost: its executor missed 3 heartbeats"));
  EXPECT_FALSE(rm_.state().hosts.at("a0").alive);
  // The other executors, a0's store and every scheduler hear of it, and the client.
  std::vector<std::string> told;
  for (const SendAction& send : SendsOf<proto::HostChanged>(lost)) told.push_back(send.routing_id);
  EXPECT_THAT(told, ElementsAre("exec-a1", "exec-a2"));
  EXPECT_EQ(lost.Sent<proto::HostChanged>().size(), 4u);  // and the store and the scheduler
  const auto notices = SendsOf<proto::ServiceChanged>(lost);
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_TRUE(std::get<proto::ServiceChanged>(notices[0].message).lost);
  // Placement leaves it out.
  const proto::SliceInfo slice = CreateSlice(client, 4);
  for (const auto& device : slice.devices) EXPECT_NE(device.host, "a0");

  RmActions back = Heartbeat(proto::Heartbeat::kExecutor, "a0");
  EXPECT_THAT(back.Topics(), ElementsAre("host.back"));
  EXPECT_FALSE(back.Sent<proto::HostChanged>().at(0).lost);
  EXPECT_TRUE(rm_.state().hosts.at("a0").alive);
}

TEST_F(ControllerTest, ADrainedHostThatFallsSilentHasLeft) {
  StartCluster();
  Ok(rm_.DrainHost({"a2"}, From("operator"), now_));
  RmActions left = Advance(kLapse + 100ms, {"a2", "a2.store"});
  EXPECT_THAT(FieldOf(left, "host.lost", "reason"), HasSubstr("it was drained and has left"));
  EXPECT_THAT(left.Topics(), Contains("host.store_lost"));
  // Back under its name: no longer drained.
  RegisterHost("a2");
  EXPECT_FALSE(rm_.state().hosts.at("a2").drained);
}

TEST_F(ControllerTest, AStoreThatRestartedIsLostThenBack) {
  StartCluster();
  RmActions restarted = Heartbeat(proto::Heartbeat::kStore, "a1", 2);
  EXPECT_THAT(restarted.Topics(), ElementsAre("host.store_lost", "host.store_back"));
  EXPECT_TRUE(restarted.state_changed);  // its instance persists
  const auto to_executor = SendsOf<proto::ServiceChanged>(restarted);
  ASSERT_GE(to_executor.size(), 1u);
  EXPECT_EQ(to_executor[0].routing_id, "exec-a1");
  const auto& lost = std::get<proto::ServiceChanged>(to_executor[0].message);
  EXPECT_TRUE(lost.lost);
  EXPECT_EQ(lost.instance, 1u);  // the old one is gone
  EXPECT_EQ(rm_.state().hosts.at("a1").store_instance, 2u);
  EXPECT_TRUE(rm_.state().hosts.at("a1").store_alive);
  // A silent store alone is lost; its executor lives on.
  RmActions silent = Advance(kLapse + 100ms, {"a1.store"});
  EXPECT_THAT(silent.Topics(), ElementsAre("host.store_lost"));
  EXPECT_TRUE(rm_.state().hosts.at("a1").alive);
}

TEST_F(ControllerTest, ASchedulerLostIsToldToClientsAndSlicesWaitForItsReturn) {
  StartCluster();
  const uint64_t client = Hello();
  RmActions lost = Advance(kLapse + 100ms, {"scheduler"}, {client});
  EXPECT_THAT(lost.Topics(), ElementsAre("island.lost"));
  EXPECT_EQ(lost.Sent<proto::ServiceChanged>().size(), 1u);
  EXPECT_THAT(rm_.CreateSlice({client, 1, "a", ""}, From("client"), now_),
              StatusIs(Code::kUnavailable, "slices wait for it to come back"));
  EXPECT_THAT(Heartbeat(proto::Heartbeat::kScheduler, "a").Topics(), ElementsAre("island.back"));
  // One registering while believed alive restarted: lost, then back at once.
  EXPECT_THAT(RegisterScheduler().Topics(),
              ElementsAre("island.lost", "island.scheduler", "island.back"));
}

TEST_F(ControllerTest, ASchedulerThatMovedIsToldToTheClientsOfItsSlices) {
  StartCluster();
  const uint64_t client = Hello();
  CreateSlice(client, 2);
  RmActions moved = Ok(rm_.RegisterScheduler({"a", "tcp://sched:2"}, From("sched"), now_));
  const auto remapped = moved.Sent<proto::SliceRemapped>();
  ASSERT_EQ(remapped.size(), 1u);
  EXPECT_EQ(remapped[0].slice.scheduler_endpoint, "tcp://sched:2");
}

TEST_F(ControllerTest, AClientSilentPastTheLapseIsDroppedWithItsSlices) {
  StartCluster();
  const uint64_t quiet = Hello();
  const uint64_t talking = Hello("talking");
  CreateSlice(quiet, 2);
  EXPECT_THAT(Advance(kLapse, {}, {talking}).Topics(), IsEmpty());
  RmActions dropped = Advance(100ms, {}, {talking});
  EXPECT_THAT(dropped.Topics(), ElementsAre("slice.released", "client.gone"));
  EXPECT_THAT(FieldOf(dropped, "client.gone", "reason"),
              HasSubstr("heartbeat lapsed: the RM heard none from it for 300 ms"));
  EXPECT_EQ(rm_.state().clients.count(quiet), 0u);
  EXPECT_EQ(rm_.state().clients.count(talking), 1u);
  EXPECT_THAT(rm_.CreateSlice({quiet, 1, "", ""}, From("client"), now_),
              StatusIs(Code::kNotFound, "heartbeat lapsed"));
}

TEST_F(ControllerTest, EachPeriodTheTableOfLiveClientsIsToldToEveryStoreAndScheduler) {
  StartCluster();
  const uint64_t quiet = Hello();
  const uint64_t talking = Hello("talking");
  const auto tables = [](const RmActions& actions) {
    std::vector<std::vector<uint64_t>> alive;
    for (const auto& told : actions.Sent<proto::OwnersKnown>()) {
      if (told.table) alive.push_back(told.alive_clients);
    }
    return alive;
  };
  // Four checks a period, one table a period, to three stores and one scheduler each.
  const auto first = tables(Advance(std::chrono::milliseconds(kHeartbeatMs), {}, {talking}));
  ASSERT_EQ(first.size(), 4u);
  EXPECT_THAT(first[0], ElementsAre(quiet, talking));
  Advance(kLapse + 100ms, {}, {talking});  // quiet lapses
  const auto later = tables(Advance(std::chrono::milliseconds(kHeartbeatMs), {}, {talking}));
  ASSERT_EQ(later.size(), 4u);
  EXPECT_THAT(later[3], ElementsAre(talking));
}

TEST_F(ControllerTest, ARestoredRmJudgesNobodyBeforeTheReconnectGrace) {
  StartCluster();
  const uint64_t client = Hello();
  Controller restarted(Options(), MakeSpreadEvenlyPolicy(), now_);
  restarted.Restore(rm_.state(), now_);
  const auto check = LivenessCheckPeriod(kHeartbeatMs);
  RmActions judged;
  for (auto t = now_ + check; t < now_ + kReconnectGrace; t += check) {
    judged.Append(restarted.CheckLiveness(t));
  }
  EXPECT_THAT(judged.Topics(), IsEmpty());
  RmActions after = restarted.CheckLiveness(now_ + kReconnectGrace);
  EXPECT_THAT(after.Topics(), Contains("host.lost"));
  EXPECT_THAT(FieldOf(after, "client.gone", "client"), std::to_string(client));
}

TEST_F(ControllerTest, AnRmThatStalledJudgesNobodyForALapse) {
  StartCluster();
  now_ += 1s;  // no check ran for ten heartbeat periods: everyone seems silent
  EXPECT_THAT(rm_.CheckLiveness(now_).Topics(), IsEmpty());
  EXPECT_THAT(Advance(kLapse - 50ms, {"a0"}).Topics(), IsEmpty());
}

TEST_F(ControllerTest, ASliceOnALostHostIsRemappedOnceItsFunctionsCompiled) {
  StartCluster();
  const uint64_t client = Hello();
  const proto::SliceInfo slice = CreateSlice(client, 2);
  RegisterFunction(client, slice);
  const std::string lost_host = slice.devices[0].host;

  RmActions lost = Advance(kLapse + 100ms, {lost_host}, {client});
  const auto compiles = SendsOf<proto::Compile>(lost);
  ASSERT_EQ(compiles.size(), 2u);  // on both hosts of the new mapping
  for (const SendAction& compile : compiles) {
    EXPECT_NE(compile.routing_id, "exec-" + lost_host);
    EXPECT_EQ(std::get<proto::Compile>(compile.message).slice_mapping, 1u);
  }
  EXPECT_TRUE(lost.Sent<proto::SliceRemapped>().empty()) << "told before its functions compiled";
  EXPECT_EQ(rm_.pending().remaps(), 1u);

  RmActions compiled = AnswerCompiles(lost);
  const auto remapped = compiled.Sent<proto::SliceRemapped>();
  ASSERT_EQ(remapped.size(), 1u);
  EXPECT_EQ(remapped[0].slice.mapping, 1u);
  for (const auto& device : remapped[0].slice.devices) EXPECT_NE(device.host, lost_host);
  EXPECT_THAT(remapped[0].reason, HasSubstr("lost: its executor missed 3 heartbeats"));
  EXPECT_THAT(compiled.Topics(), ElementsAre("slice.remapped"));
}

TEST_F(ControllerTest, ARemapNotCompiledInTimeIsToldWithAnError) {
  StartCluster();
  const uint64_t client = Hello();
  const proto::SliceInfo slice = CreateSlice(client, 2);
  RegisterFunction(client, slice);
  Advance(kLapse + 100ms, {slice.devices[0].host}, {client});
  RmActions late = Advance(1100ms, {slice.devices[0].host}, {client});
  EXPECT_THAT(late.Topics(), ElementsAre("error.rm", "slice.remapped"));
  EXPECT_THAT(FieldOf(late, "error.rm", "error"), HasSubstr("did not compile within 1 s"));
  EXPECT_EQ(late.Sent<proto::SliceRemapped>().size(), 1u);
}

TEST_F(ControllerTest, ASliceWithNowhereToGoKeepsItsLostDevices) {
  for (const char* host : {"a0", "a1"}) RegisterHost(host);
  RegisterScheduler();
  const uint64_t client = Hello();
  const proto::SliceInfo slice = CreateSlice(client, 4);  // every device
  RmActions lost = Advance(kLapse + 100ms, {"a0"}, {client});
  EXPECT_THAT(lost.Topics(), ElementsAre("host.lost", "error.rm"));
  EXPECT_EQ(rm_.state().slices.at(slice.slice_id).mapping, 0u);
}

TEST_F(ControllerTest, ADrainIsAnsweredOnceEverySliceItMovedWasRemapped) {
  StartCluster();
  const uint64_t client = Hello();
  const proto::SliceInfo slice = CreateSlice(client, 2);
  RegisterFunction(client, slice);
  const std::string host = slice.devices[0].host;
  Caller member = From("operator");
  RmActions drained = Ok(rm_.DrainHost({host}, member, now_));
  EXPECT_EQ(FieldOf(drained, "host.drained", "moved"), std::to_string(slice.slice_id));
  EXPECT_TRUE(SendsOf<proto::DrainHostReply>(drained).empty());
  EXPECT_TRUE(rm_.state().hosts.at(host).drained);
  // None of its devices takes a slice over.
  for (const SendAction& compile : SendsOf<proto::Compile>(drained)) {
    EXPECT_NE(compile.routing_id, "exec-" + host);
  }

  RmActions compiled = AnswerCompiles(drained);
  EXPECT_THAT(compiled.Topics(), ElementsAre("slice.remapped"));
  const auto replies = SendsOf<proto::DrainHostReply>(compiled);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].routing_id, "operator");
  EXPECT_EQ(replies[0].request_id, member.request_id);
  EXPECT_THAT(std::get<proto::DrainHostReply>(replies[0].message).moved,
              ElementsAre(slice.slice_id));
  EXPECT_EQ(rm_.pending().drains(), 0u);
}

TEST_F(ControllerTest, ADrainThatMovesNoFunctionIsAnsweredAtOnce) {
  StartCluster();
  const uint64_t client = Hello();
  const proto::SliceInfo slice = CreateSlice(client, 2);  // no function on it
  RmActions drained = Ok(rm_.DrainHost({slice.devices[0].host}, From("operator"), now_));
  EXPECT_THAT(drained.Topics(), ElementsAre("slice.remapped", "host.drained"));
  EXPECT_EQ(SendsOf<proto::DrainHostReply>(drained).size(), 1u);
  EXPECT_THAT(drained.Topics(), Not(Contains("error.rm")));
  EXPECT_THAT(rm_.DrainHost({"nowhere"}, From("operator"), now_),
              StatusIs(Code::kNotFound, "host 'nowhere' is unknown"));
}

}  // namespace
}  // namespace atl::rm
