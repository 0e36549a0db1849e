// Clusters across machines, each machine a network namespace of its own (VirtualNetwork:
// veth pairs to a bridge, private addresses): the head (the RM and island0's scheduler) on
// one, hosts a and b of island0 and c of island1 on three more, each started with the CLI
// from its own state dir (`ip netns exec NS atoll start ...`), as on real machines; this
// test's clients run on a fifth (its main thread enters that namespace). c starts island1's
// scheduler, since the head does not know that island.
//
// - Every address the RM hands out is a machine's own, never loopback.
// - A host's link is cut mid-program: the program fails naming the host, another client's
//   program on the other hosts goes on, the host's slice is remapped; the link comes back,
//   the host rejoins and runs a later program.
// - The RM is SIGKILLed; its supervisor starts it again on the same endpoints with the state
//   file in the head's state dir (the volume of a containerised RM): it knows the hosts and
//   schedulers of the other machines again, and programs run.
//
// Skipped, saying why, where network namespaces cannot be made (no CAP_NET_ADMIN).
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>

#include "atoll/client.h"
#include "common/service/advertise.h"
#include "launcher/cluster_info.h"
#include "launcher/virtual_network.h"
#include "tests/e2e/event_recorder.h"
#include "tests/e2e/rm_topology.h"
#include "tests/launcher/cluster_test_util.h"
#include "tests/launcher/subprocess.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

const std::string kConfig = ATOLL_SOURCE_DIR "/tests/e2e/netns.toml";
const std::string kAtoll = ATOLL_BIN_DIR "/atoll";

struct HostMachine {
  std::string name;    // the machine's and the host's
  std::string island;  // the island it joins
  bool bind = true;    // --bind its address; false: the default (0.0.0.0, advertising the
                       // address of the interface that routes to the RM)
};
const std::vector<HostMachine> kHosts = {
    {"a", "island0", true}, {"b", "island0", true}, {"c", "island1", false}};

class NetnsTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    auto network = VirtualNetwork::Create({"head", "a", "b", "c", "client"});
    if (network.status().code() == Code::kFailedPrecondition) {
      skip_ = new std::string(network.status().ToString());
      return;
    }
    ASSERT_THAT(network, IsOk());
    network_ = std::move(network).value().release();
    dir_ = new TempDir();
    StartMachines();
    // From here on this thread is a machine of its own: its clients' and event readers'
    // sockets (made by contexts it creates) live there.
    ASSERT_THAT(network_->Enter("client"), IsOk());
  }

  static void TearDownTestSuite() {
    if (network_ != nullptr) {
      EXPECT_THAT(network_->Leave(), IsOk());
      // Hosts first (drained by an RM they reach: every link up), then the head, each on its
      // machine; the network then kills whatever a stop left and removes the namespaces.
      for (const HostMachine& h : kHosts) EXPECT_THAT(network_->SetLink(h.name, true), IsOk());
      for (const HostMachine& h : kHosts) Stop(h.name);
      Stop("head");
      delete network_;
      network_ = nullptr;
    }
    delete dir_;
    dir_ = nullptr;
    delete skip_;
    skip_ = nullptr;
  }

  void SetUp() override {
    if (skip_ != nullptr) GTEST_SKIP() << *skip_;
    ASSERT_FALSE(rm_endpoint_.empty()) << "the cluster did not start";
    // A test that failed with a link cut leaves no cut to the next.
    for (const HostMachine& h : kHosts) ASSERT_THAT(network_->SetLink(h.name, true), IsOk());
  }

 protected:
  static std::string StateDir(const std::string& machine) { return dir_->path() + "/" + machine; }
  static std::string Address(const std::string& machine) { return network_->Address(machine); }

  static CommandResult Atoll(const std::string& machine, std::vector<std::string> args) {
    args.insert(args.begin(), {kAtoll, "--state-dir", StateDir(machine)});
    return RunCommand(network_->Inside(machine, args), 60s);
  }

  static void StartMachines() {
    const CommandResult head =
        Atoll("head", {"start", "head", "--config", kConfig, "--island", "island0", "--bind",
                       Address("head"), "--bin-dir", ATOLL_BIN_DIR});
    ASSERT_EQ(head.exit_code, 0) << head.Describe();
    auto record = ReadClusterInfo(StateDir("head"));
    ASSERT_THAT(record, IsOk());
    for (const HostMachine& h : kHosts) {
      // The cluster's keys, copied to the machine as `scp -r` would.
      const std::string keys = StateDir(h.name) + "/keys";
      std::error_code ec;
      fs::create_directories(StateDir(h.name), ec);
      fs::copy(record->keys_dir, keys, fs::copy_options::recursive, ec);
      ASSERT_FALSE(ec) << ec.message();
      std::vector<std::string> args = {
          "--rm",      record->rm_endpoint, "--keys", keys,     "start", "host",      "--config",
          kConfig,     "--island",          h.island, "--host", h.name,  "--devices", "2",
          "--bin-dir", ATOLL_BIN_DIR};
      if (h.bind) args.insert(args.end(), {"--bind", Address(h.name)});
      const CommandResult host = Atoll(h.name, args);
      ASSERT_EQ(host.exit_code, 0) << host.Describe();
      EXPECT_THAT(host.out, HasSubstr("host " + h.name + " joined island " + h.island));
    }
    keys_dir_ = record->keys_dir;
    events_out_ = record->events_out;
    rm_endpoint_ = record->rm_endpoint;
    // The event recorders and AskRm speak as members, with the cluster's keys.
    setenv("ATOLL_KEYS", keys_dir_.c_str(), 1);
  }

  static void Stop(const std::string& machine) {
    if (!fs::exists(StateDir(machine))) return;
    const CommandResult stopped = Atoll(machine, {"stop"});
    EXPECT_EQ(stopped.exit_code, 0) << machine << ": " << stopped.Describe();
  }

  static std::unique_ptr<Client> Connect(const std::string& name) {
    auto client =
        Client::Connect({.rm_endpoint = rm_endpoint_, .name = name, .keys_dir = keys_dir_});
    EXPECT_THAT(client, IsOk());
    return client.ok() ? std::move(client).value() : nullptr;
  }

  static inline std::string* skip_ = nullptr;  // why namespaces cannot be made here
  static inline VirtualNetwork* network_ = nullptr;
  static inline TempDir* dir_ = nullptr;  // a state dir per machine
  static inline std::string rm_endpoint_, events_out_, keys_dir_;
};

// y = (x + 1) * 2 for x f32[2]: the +1 spins `spin_us` on `first`, the *2 runs on `second`,
// so the program crosses islands when the slices do.
Result<Program> AcrossSlices(Client& client, const Slice& first, const Slice& second,
                             double spin_us) {
  FunctionBuilder fb("inc_spin");
  fb.Output(fb.Spin(fb.Add(fb.Input(DType::kF32, {2}), 1.0), spin_us));
  ATOLL_ASSIGN_OR_RETURN(Function f, client.Register(fb, first));
  FunctionBuilder gb("double");
  gb.Output(gb.Mul(gb.Input(DType::kF32, {2}), 2.0));
  ATOLL_ASSIGN_OR_RETURN(Function g, client.Register(gb, second));
  ProgramBuilder p;
  p.Return({p.Call(g, {p.Call(f, {p.Arg(DType::kF32, {2})})[0]})[0]});
  return p.Build();
}

const Tensor kX = Tensor::F32({2}, {1, 2});
const Tensor kY = Tensor::F32({2}, {4, 6});

// The one host a slice is on.
std::string OnlyHostOf(const Topology& t, uint64_t slice) {
  const std::set<std::string> hosts = HostsOf(t, slice);
  EXPECT_EQ(hosts.size(), 1u) << "slice " << slice;
  return hosts.empty() ? "" : *hosts.begin();
}

// Whether the RM counts the host's executor and store alive.
bool Up(const Topology& t, const std::string& host) {
  auto executor = t.alive.find(host);
  auto store = t.store_alive.find(host);
  return executor != t.alive.end() && executor->second && store != t.store_alive.end() &&
         store->second;
}

// Polls the RM (bounded) until `ready` holds of its view; returns the last view.
template <typename Pred>
Topology WaitForTopology(const std::string& rm, Pred ready, std::chrono::milliseconds timeout) {
  Topology t = AskRm(rm);
  WaitFor(
      [&] {
        t = AskRm(rm);
        return ready(t);
      },
      static_cast<int>(timeout.count()));
  return t;
}

TEST_F(NetnsTest, EveryAddressTheRmHandsOutIsOnItsOwnMachine) {
  MemberContext context;
  net::Requester rm(context, rm_endpoint_);
  ASSERT_THAT(rm.Connect(), IsOk());
  auto status = rm.Call<proto::ClusterStatus>(proto::GetClusterStatus{}, 5s);
  ASSERT_THAT(status, IsOk());
  auto host_of = [](const std::string& endpoint) {
    auto host = EndpointHost(endpoint);
    EXPECT_THAT(host, IsOk()) << endpoint;
    return host.ok() ? *host : "";
  };
  EXPECT_EQ(host_of(rm_endpoint_), Address("head"));
  EXPECT_EQ(host_of(status->events_in), Address("head"));
  EXPECT_EQ(host_of(status->events_out), Address("head"));
  std::set<std::string> hosts_seen;
  for (const auto& island : status->islands) {
    // island0's scheduler is the head's; island1's came with host c.
    EXPECT_EQ(host_of(island.scheduler_endpoint), Address(island.name == "island0" ? "head" : "c"))
        << island.name;
    for (const auto& host : island.hosts) {
      hosts_seen.insert(host.name);
      EXPECT_EQ(host_of(host.control_endpoint), Address(host.name)) << host.name;
      EXPECT_EQ(host_of(host.store_endpoint), Address(host.name)) << host.name;
    }
  }
  EXPECT_EQ(hosts_seen, (std::set<std::string>{"a", "b", "c"}));
  for (const char* machine : {"head", "a", "b", "c"}) {
    EXPECT_FALSE(Address(machine).starts_with("127.")) << machine;
  }
}

TEST_F(NetnsTest, ACutLinkFailsTheRunNamingItsHostOthersGoOnAndTheHostRejoins) {
  auto tenant = Connect("tenant");
  auto bystander = Connect("bystander");
  ASSERT_NE(tenant, nullptr);
  ASSERT_NE(bystander, nullptr);
  // One device on each island each: the bystander's island0 device is on the other host
  // of island0 (placement takes the least loaded), its island1 device on c as the tenant's.
  auto tenant0 = tenant->CreateSlice(1, "island0");
  auto tenant1 = tenant->CreateSlice(1, "island1");
  auto bystander0 = bystander->CreateSlice(1, "island0");
  auto bystander1 = bystander->CreateSlice(1, "island1");
  for (const auto* slice : {&tenant0, &tenant1, &bystander0, &bystander1}) {
    ASSERT_TRUE(slice->ok()) << slice->status().ToString();
  }
  Topology t = AskRm(rm_endpoint_);
  const std::string victim = OnlyHostOf(t, tenant0->id());
  const std::string survivor = OnlyHostOf(t, bystander0->id());
  ASSERT_THAT(victim, ::testing::AnyOf("a", "b"));
  ASSERT_THAT(survivor, ::testing::AnyOf("a", "b"));
  ASSERT_NE(victim, survivor);
  // 3 s of spin: both programs are in flight when the cut is noticed (within a second).
  auto doomed_program = AcrossSlices(*tenant, *tenant0, *tenant1, 3e6);
  auto going_program = AcrossSlices(*bystander, *bystander0, *bystander1, 3e6);
  ASSERT_THAT(doomed_program, IsOk());
  ASSERT_THAT(going_program, IsOk());

  EventRecorder events(events_out_);
  auto doomed = tenant->Submit(*doomed_program, {kX});
  auto going = bystander->Submit(*going_program, {kX});
  ASSERT_THAT(doomed, IsOk());
  ASSERT_THAT(going, IsOk());
  // Cut once the victim holds the tenant's spin.
  ASSERT_TRUE(events
                  .WaitFor(
                      "dispatch.admitted",
                      [&](const Event& e) {
                        return e.fields["run"].get<uint64_t>() == doomed->id() &&
                               e.fields["host"] == victim;
                      },
                      20s)
                  .has_value());
  ASSERT_THAT(network_->SetLink(victim, false), IsOk());

  // The tenant's program fails, naming the host.
  auto failed = doomed->Wait(30s);
  ASSERT_FALSE(failed.ok()) << "a run through a cut host succeeded";
  EXPECT_EQ(failed.status().code(), Code::kUnavailable) << failed.status().ToString();
  EXPECT_THAT(failed.status().message(), HasSubstr("host " + victim + " "));
  EXPECT_THAT(failed.status().message(), HasSubstr("lost"));

  // The RM lost the host and moved the tenant's slice onto island0's other host.
  auto lost = events.WaitFor(
      "host.lost", [&](const Event& e) { return e.fields["host"] == victim; }, 20s);
  ASSERT_TRUE(lost.has_value()) << "no host.lost for " << victim;
  auto remapped = events.WaitFor(
      "slice.remapped",
      [&](const Event& e) { return e.fields["slice"].get<uint64_t>() == tenant0->id(); }, 20s);
  ASSERT_TRUE(remapped.has_value()) << "no slice.remapped for slice " << tenant0->id();
  EXPECT_THAT(remapped->fields["reason"].get<std::string>(), HasSubstr("host " + victim + " "));
  t = AskRm(rm_endpoint_);
  EXPECT_FALSE(t.alive[victim]);
  EXPECT_EQ(OnlyHostOf(t, tenant0->id()), survivor);

  // The bystander's program, in flight all along, finishes right.
  auto went = going->Wait(30s);
  ASSERT_THAT(went, IsOk());
  EXPECT_EQ(went->at(0), kY);

  // The link comes back: the host rejoins, executor and store...
  ASSERT_THAT(network_->SetLink(victim, true), IsOk());
  ASSERT_TRUE(events
                  .WaitFor(
                      "host.back", [&](const Event& e) { return e.fields["host"] == victim; }, 30s)
                  .has_value())
      << victim << " did not come back";
  t = WaitForTopology(
      rm_endpoint_, [&](const Topology& v) { return Up(v, victim); }, 20s);
  ASSERT_TRUE(Up(t, victim));

  // ... and runs a later program: a slice of every device of island0 takes its two. (The
  // function's registration compiles on it, after the RM's notice that its store is back.)
  auto wide = tenant->CreateSlice(4, "island0");
  ASSERT_THAT(wide, IsOk());
  EXPECT_EQ(HostsOf(AskRm(rm_endpoint_), wide->id()), (std::set<std::string>{"a", "b"}));
  FunctionBuilder tb("triple");
  tb.Output(tb.Mul(tb.Input(DType::kF32, {4}), 3.0));
  auto triple = tenant->Register(tb, *wide);
  ASSERT_THAT(triple, IsOk());
  ProgramBuilder pb;
  pb.Return({pb.Call(*triple, {pb.Arg(DType::kF32, {4})})[0]});
  auto later = tenant->Submit(pb.Build().value(), {Tensor::F32({4}, {1, 2, 3, 4})});
  ASSERT_THAT(later, IsOk());
  auto later_out = later->Wait(30s);
  ASSERT_THAT(later_out, IsOk());
  EXPECT_EQ(later_out->at(0), Tensor::F32({4}, {3, 6, 9, 12}));
  EXPECT_TRUE(events
                  .WaitFor(
                      "gang.done",
                      [&](const Event& e) {
                        return e.fields["run"].get<uint64_t>() == later->id() &&
                               e.fields["host"] == victim;
                      },
                      10s)
                  .has_value())
      << victim << " ran no shard of the later program";
}

TEST_F(NetnsTest, TheRmRestartsFromTheStateOnItsVolumeAndKnowsTheOtherMachinesAgain) {
  auto client = Connect("survivor");
  ASSERT_NE(client, nullptr);
  auto first = client->CreateSlice(1, "island0");
  auto second = client->CreateSlice(1, "island1");
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(second, IsOk());
  auto program = AcrossSlices(*client, *first, *second, 0);
  ASSERT_THAT(program, IsOk());
  auto before_run = client->Submit(*program, {kX});
  ASSERT_THAT(before_run, IsOk());
  ASSERT_THAT(before_run->Wait(30s), IsOk());
  const Topology before = WaitForTopology(
      rm_endpoint_,
      [](const Topology& v) {
        return std::all_of(kHosts.begin(), kHosts.end(),
                           [&](const HostMachine& h) { return Up(v, h.name); });
      },
      20s);
  for (const HostMachine& h : kHosts) ASSERT_TRUE(Up(before, h.name)) << h.name;

  // The state is in the head's state dir, which stands for the RM's volume.
  const std::string state_file = StateDir("head") + "/rm.state";
  ASSERT_TRUE(fs::exists(state_file));
  auto record = ReadClusterInfo(StateDir("head"));
  ASSERT_THAT(record, IsOk());
  const ProcessInfo* rm = record->Find("rm");
  ASSERT_NE(rm, nullptr);
  const int64_t old_pid = rm->pid;
  const int64_t old_restarts = rm->restarts;
  ASSERT_EQ(kill(static_cast<pid_t>(old_pid), SIGKILL), 0);

  // The supervisor starts it again: a new pid, one more restart.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto now = ReadClusterInfo(StateDir("head"));
        const ProcessInfo* p = now.ok() ? now->Find("rm") : nullptr;
        return p != nullptr && p->pid != 0 && p->pid != old_pid && p->restarts == old_restarts + 1;
      },
      30'000))
      << "the RM was not started again";

  // It knows every host and scheduler of the other machines again, alive, where they were,
  // and the slices on them.
  const Topology after = WaitForTopology(
      rm_endpoint_,
      [&](const Topology& v) {
        return v.island_of == before.island_of && v.alive == before.alive &&
               v.store_alive == before.store_alive && v.scheduled == before.scheduled;
      },
      20s);
  EXPECT_EQ(after.island_of, before.island_of);
  EXPECT_EQ(after.host_of, before.host_of);
  EXPECT_EQ(after.alive, before.alive);
  EXPECT_EQ(after.store_alive, before.store_alive);
  EXPECT_EQ(after.scheduled, before.scheduled);
  EXPECT_EQ(after.slices, before.slices);

  // The client's program runs again, and a new client's new functions compile on the
  // executors of the other machines and run across both islands.
  auto again = client->Submit(*program, {kX});
  ASSERT_THAT(again, IsOk());
  auto again_out = again->Wait(30s);
  ASSERT_THAT(again_out, IsOk());
  EXPECT_EQ(again_out->at(0), kY);

  auto newcomer = Connect("newcomer");
  ASSERT_NE(newcomer, nullptr);
  auto new_first = newcomer->CreateSlice(2, "island0");
  auto new_second = newcomer->CreateSlice(2, "island1");
  ASSERT_THAT(new_first, IsOk());
  ASSERT_THAT(new_second, IsOk());
  auto new_program = AcrossSlices(*newcomer, *new_first, *new_second, 0);
  ASSERT_THAT(new_program, IsOk());
  auto fresh = newcomer->Submit(*new_program, {kX});
  ASSERT_THAT(fresh, IsOk());
  auto fresh_out = fresh->Wait(30s);
  ASSERT_THAT(fresh_out, IsOk());
  EXPECT_EQ(fresh_out->at(0), kY);
}

}  // namespace
}  // namespace atl::testing
