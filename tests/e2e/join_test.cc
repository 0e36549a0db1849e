// Clusters across machines, on one machine: hosts join a running cluster with `atoll start
// host` (the CLI binary, as a user runs it, with a state dir of its own as another machine
// would have, and the cluster's keys), run programs, and leave with `atoll stop`, which
// drains them first; an island the RM never heard of joins with its first host, which
// brings its scheduler; a head and a host started from one state dir stop together.
// Everything runs under CURVE on 127.0.0.1 with free ports.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <gmock/gmock.h>

#include "common/net/transport.h"
#include "launcher/local_cluster.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/event_recorder.h"
#include "tests/e2e/member_context.h"
#include "tests/e2e/rm_topology.h"
#include "tests/launcher/cluster_test_util.h"
#include "tests/launcher/subprocess.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

const std::string kConfig = ATOLL_SOURCE_DIR "/config/test.toml";

// A state dir standing in for another machine's, whose services are stopped when the test
// ends however it ends (they run detached, as `atoll start` leaves them).
class Machine {
 public:
  ~Machine() { RunCommand({ATOLL_BIN_DIR "/atoll", "--state-dir", state_dir(), "stop"}, 60s); }
  std::string state_dir() const { return dir_.path() + "/state"; }

 private:
  TempDir dir_;
};

// `atoll start host` joining the fixture's cluster from `machine`.
CommandResult StartHost(const Machine& machine, const std::string& island, const std::string& host,
                        int devices) {
  return RunCommand(
      ClusterTest::AtollCommand({"--state-dir", machine.state_dir(), "start", "host", "--island",
                                 island, "--host", host, "--devices", std::to_string(devices),
                                 "--config", kConfig, "--bin-dir", ATOLL_BIN_DIR}),
      60s);
}

CommandResult Stop(const Machine& machine) {
  return RunCommand(ClusterTest::AtollCommand({"--state-dir", machine.state_dir(), "stop"}), 60s);
}

// A one-function program: x * factor, x f32[4] split over the function's slice.
Program Times(Client& client, const Slice& slice, double factor, Function* f) {
  FunctionBuilder b("times");
  b.Output(b.Mul(b.Input(DType::kF32, {4}), factor));
  auto registered = client.Register(b, slice);
  EXPECT_THAT(registered, IsOk());
  *f = *registered;
  ProgramBuilder p;
  p.Return({p.Call(*f, {p.Arg(DType::kF32, {4})})[0]});
  return p.Build().value();
}

using JoinTest = ClusterTest;

TEST_F(JoinTest, AHostJoinsRunsASliceAndIsDrainedWhileAnotherClientGoesOn) {
  // The bystander's slice takes every device of island0's configured hosts, so that the
  // joining host's are the least loaded there and take the next slice.
  auto bystander = Connect("bystander");
  ASSERT_NE(bystander, nullptr);
  auto wide = bystander->CreateSlice(4, "island0");
  ASSERT_THAT(wide, IsOk());
  FunctionBuilder sb("slow");
  sb.Output(sb.Spin(sb.Add(sb.Input(DType::kF32, {4}), 1.0), 2e6));  // 2 s on each device
  auto slow = bystander->Register(sb, *wide);
  ASSERT_THAT(slow, IsOk());
  ProgramBuilder pb;
  pb.Return({pb.Call(*slow, {pb.Arg(DType::kF32, {4})})[0]});
  const Program slow_program = pb.Build().value();
  const std::set<std::string> island0_hosts = HostsOf(AskRm(RmEndpoint()), wide->id());

  Machine machine;
  const CommandResult joined = StartHost(machine, "island0", "joiner", 2);
  ASSERT_EQ(joined.exit_code, 0) << joined.Describe();
  EXPECT_THAT(joined.out, HasSubstr("host joiner joined island island0 (2 cpu devices)"));
  EXPECT_THAT(joined.out, ::testing::Not(HasSubstr("scheduler-island0")))
      << "island0 has a scheduler: the host starts none";
  auto record = ReadClusterInfo(machine.state_dir(), "host-joiner");
  ASSERT_THAT(record, IsOk());
  ASSERT_EQ(record->processes.size(), 2u);
  Topology t = AskRm(RmEndpoint());
  EXPECT_EQ(t.island_of["joiner"], "island0");
  EXPECT_TRUE(t.alive["joiner"]);
  // The joined machine's commands find the cluster through the host's record.
  const CommandResult status = RunCommand(
      {ATOLL_BIN_DIR "/atoll", "--state-dir", machine.state_dir(), "--keys", KeysDir(), "status"});
  ASSERT_EQ(status.exit_code, 0) << status.Describe();
  EXPECT_THAT(status.out, HasSubstr("host joiner   alive"));

  // A program on a slice that needs the joined host's devices.
  auto tenant = Connect("tenant");
  ASSERT_NE(tenant, nullptr);
  auto slice = tenant->CreateSlice(2, "island0");
  ASSERT_THAT(slice, IsOk());
  t = AskRm(RmEndpoint());
  ASSERT_EQ(HostsOf(t, slice->id()), std::set<std::string>{"joiner"});
  Function times;
  const Program program = Times(*tenant, *slice, 3.0, &times);
  const Tensor x = Tensor::F32({4}, {1, 2, 3, 4});
  const Tensor want = Tensor::F32({4}, {3, 6, 9, 12});
  auto first = tenant->Submit(program, {x});
  ASSERT_THAT(first, IsOk());
  auto first_out = first->Wait(30s);
  ASSERT_THAT(first_out, IsOk());
  EXPECT_EQ(first_out->at(0), want);

  // The bystander's program runs on the other hosts while the joined host is drained.
  EventRecorder events(EventsEndpoint());
  auto running = bystander->Submit(slow_program, {x});
  ASSERT_THAT(running, IsOk());
  ASSERT_TRUE(
      events
          .WaitFor(
              "dispatch.admitted",
              [&](const Event& e) { return e.fields["run"].get<uint64_t>() == running->id(); }, 20s)
          .has_value());
  const CommandResult stopped = Stop(machine);
  ASSERT_EQ(stopped.exit_code, 0) << stopped.Describe();
  EXPECT_THAT(stopped.out, HasSubstr("drained host joiner: 1 slice moved off it"));
  EXPECT_THAT(stopped.out, HasSubstr("host-joiner: stopped 2 processes"));
  for (const auto& p : record->processes) {
    EXPECT_FALSE(proc::IsRunning(static_cast<pid_t>(p.pid))) << p.name;
  }
  EXPECT_FALSE(std::filesystem::exists(ClusterInfoPath(machine.state_dir(), "host-joiner")));

  auto bystanders = running->Wait(30s);
  ASSERT_THAT(bystanders, IsOk());
  EXPECT_EQ(bystanders->at(0), Tensor::F32({4}, {2, 3, 4, 5}));

  // The drained host's slice moved onto island0's other hosts, saying why.
  auto remapped = events.WaitFor(
      "slice.remapped",
      [&](const Event& e) { return e.fields["slice"].get<uint64_t>() == slice->id(); }, 20s);
  ASSERT_TRUE(remapped.has_value()) << "no slice.remapped for slice " << slice->id();
  EXPECT_THAT(remapped->fields["reason"].get<std::string>(), HasSubstr("host joiner were drained"));
  t = AskRm(RmEndpoint());
  const std::set<std::string> now_on = HostsOf(t, slice->id());
  EXPECT_TRUE(
      std::includes(island0_hosts.begin(), island0_hosts.end(), now_on.begin(), now_on.end()))
      << "slice " << slice->id() << " is on " << ::testing::PrintToString(now_on);

  // Its next run works on the new mapping.
  auto again = tenant->Submit(program, {x});
  ASSERT_THAT(again, IsOk());
  auto again_out = again->Wait(30s);
  ASSERT_THAT(again_out, IsOk());
  EXPECT_EQ(again_out->at(0), want);

  // Gone for good, it is lost as a drained host that left, not as a failure.
  auto lost = events.WaitFor(
      "host.lost", [](const Event& e) { return e.fields["host"].get<std::string>() == "joiner"; },
      10s);
  ASSERT_TRUE(lost.has_value());
  EXPECT_THAT(lost->fields["reason"].get<std::string>(), HasSubstr("drained and has left"));
}

TEST_F(JoinTest, AServiceAnnouncingAnAddressNoPeerCanReachIsRefusedAtRegistration) {
  // Refused there, rather than admitted for every later dispatch or connection to it to fail.
  MemberContext context;
  net::Requester rm(context, RmEndpoint());
  ASSERT_THAT(rm.Connect(), IsOk());
  for (const std::string endpoint :
       {"not-an-endpoint", "tcp://", "tcp://:5555", "tcp://host", "tcp://host:0",
        "tcp://host:99999", "ipc:///tmp/x", "tcp://0.0.0.0:5555"}) {
    auto executor =
        rm.Call<proto::RegisterExecutorReply>(proto::RegisterExecutor{"malformed",
                                                                      "island0",
                                                                      endpoint,
                                                                      "tcp://127.0.0.1:9",
                                                                      "tcp://127.0.0.1:9",
                                                                      {{"cpu", 1 << 20}}},
                                              5s);
    ASSERT_FALSE(executor.ok()) << endpoint << " was admitted";
    EXPECT_EQ(executor.status().code(), Code::kInvalidArgument) << executor.status().ToString();
    EXPECT_THAT(executor.status().message(), HasSubstr("'" + endpoint + "'"));
    auto scheduler = rm.Call<proto::Ok>(proto::RegisterScheduler{"nowhere", endpoint}, 5s);
    ASSERT_FALSE(scheduler.ok()) << endpoint << " was admitted";
    EXPECT_EQ(scheduler.status().code(), Code::kInvalidArgument) << scheduler.status().ToString();
  }
  const Topology t = AskRm(RmEndpoint());
  EXPECT_EQ(t.island_of.count("malformed"), 0u);
  EXPECT_EQ(t.scheduled.count("nowhere"), 0u);
}

TEST_F(JoinTest, AnIslandNoOneHeardOfJoinsWithItsFirstHostWhichStartsItsScheduler) {
  // An executor of an island without a scheduler is admitted, and slices there wait.
  {
    MemberContext context;
    net::Requester rm(context, RmEndpoint());
    ASSERT_THAT(rm.Connect(), IsOk());
    auto registered =
        rm.Call<proto::RegisterExecutorReply>(proto::RegisterExecutor{"loner",
                                                                      "lonely",
                                                                      "tcp://127.0.0.1:9",
                                                                      "tcp://127.0.0.1:9",
                                                                      "tcp://127.0.0.1:9",
                                                                      {{"cpu", 1 << 20}}},
                                              5s);
    ASSERT_THAT(registered, IsOk());
    EXPECT_EQ(registered->device_ids.size(), 1u);
  }
  auto client = Connect("islander");
  ASSERT_NE(client, nullptr);
  auto waiting = client->CreateSlice(1, "lonely");
  ASSERT_FALSE(waiting.ok());
  EXPECT_EQ(waiting.status().code(), Code::kUnavailable);
  EXPECT_THAT(waiting.status().message(), HasSubstr("island 'lonely' has no live scheduler"));

  // A host of an island the RM never heard of brings its scheduler, which serves.
  Machine machine;
  const CommandResult joined = StartHost(machine, "fresh", "newcomer", 1);
  ASSERT_EQ(joined.exit_code, 0) << joined.Describe();
  EXPECT_THAT(joined.out, HasSubstr("the island had no scheduler: started one here"));
  EXPECT_THAT(joined.out, HasSubstr("scheduler-fresh"));
  const Topology t = AskRm(RmEndpoint());
  EXPECT_EQ(t.island_of.at("newcomer"), "fresh");
  EXPECT_TRUE(t.scheduled.at("fresh"));
  EXPECT_FALSE(t.scheduled.at("lonely"));

  auto slice = client->CreateSlice(1, "fresh");
  ASSERT_THAT(slice, IsOk());
  Function times;
  const Program program = Times(*client, *slice, 2.0, &times);
  auto run = client->Submit(program, {Tensor::F32({4}, {1, 2, 3, 4})});
  ASSERT_THAT(run, IsOk());
  auto out = run->Wait(30s);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->at(0), Tensor::F32({4}, {2, 4, 6, 8}));

  // The island has no other device: the slice stays, and stop says so.
  const CommandResult stopped = Stop(machine);
  ASSERT_EQ(stopped.exit_code, 0) << stopped.Describe();
  EXPECT_THAT(stopped.out, HasSubstr("drained host newcomer: 0 slices moved off it; slices " +
                                     std::to_string(slice->id()) + " found no other device"));
  EXPECT_THAT(stopped.out, HasSubstr("host-newcomer: stopped 3 processes"));
}

// A head and a host started from one state dir (the head's machine has devices too): two
// records, one `atoll stop` for both, the host drained first.
TEST(JoinHeadTest, AHeadAndAHostFromOneStateDirStopTogether) {
  Machine machine;
  auto atoll = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {ATOLL_BIN_DIR "/atoll", "--state-dir", machine.state_dir()});
    return RunCommand(args, 60s);
  };
  const CommandResult head =
      atoll({"start", "head", "--config", kConfig, "--island", "solo", "--bin-dir", ATOLL_BIN_DIR});
  ASSERT_EQ(head.exit_code, 0) << head.Describe();
  EXPECT_THAT(head.out, HasSubstr("scheduler-solo"));
  EXPECT_THAT(head.out, ::testing::Not(HasSubstr("scheduler-island0")));
  auto info = ReadClusterInfo(machine.state_dir());
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->processes.size(), 2u);  // the RM and solo's scheduler

  // Its own keys, whatever $ATOLL_KEYS another suite of this binary set.
  const std::vector<std::string> start_host = {
      "--rm", info->rm_endpoint, "--keys", info->keys_dir, "start", "host",      "--island",
      "solo", "--host",          "local",  "--config",     kConfig, "--bin-dir", ATOLL_BIN_DIR};
  const CommandResult host = atoll(start_host);
  ASSERT_EQ(host.exit_code, 0) << host.Describe();
  EXPECT_THAT(host.out, HasSubstr("host local joined island solo"));
  EXPECT_EQ(ClusterRecords(machine.state_dir()),
            (std::vector<std::string>{"host-local", kHeadRecord}));
  const CommandResult again = atoll(start_host);
  EXPECT_EQ(again.exit_code, 1) << again.Describe();
  EXPECT_THAT(again.err, HasSubstr("host-local is already running"));

  const CommandResult stopped = atoll({"stop"});
  ASSERT_EQ(stopped.exit_code, 0) << stopped.Describe();
  EXPECT_THAT(stopped.out, HasSubstr("drained host local: 0 slices moved off it\n"
                                     "host-local: stopped 2 processes\n"
                                     "stopped 2 processes"));
  EXPECT_TRUE(ClusterRecords(machine.state_dir()).empty());
  for (const auto& p : info->processes) {
    EXPECT_FALSE(proc::IsRunning(static_cast<pid_t>(p.pid))) << p.name;
  }
}

}  // namespace
}  // namespace atl::testing
