// Many simulated hosts in one process (atoll-simhosts): a cluster of 32 sim hosts that the
// launcher runs in one process beside a host of kind "cpu" that runs as two, a program
// whose all-reduces span every host, and the refusal of a host that is not simulated. And
// device kinds, end to end: a host's devices are of its kind in the RM's status, and a
// slice that asks for a kind gets only such devices, or is refused.
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/rm_topology.h"
#include "tests/launcher/subprocess.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kSimHosts = 32;
constexpr int kDevicesPerHost = 2;

// Island "sim": kSimHosts hosts s0, s1, ... of kind sim, all in one atoll-simhosts process;
// island "real": one cpu host, c0.
std::string SimClusterToml() {
  std::string toml = fmt::format(R"([cluster]
bind_host = "127.0.0.1"
heartbeat_ms = 200
liveness = 10
sim_hosts_per_process = {}
[rm]
endpoint = "tcp://127.0.0.1:*"
events_in = "tcp://127.0.0.1:*"
events_out = "tcp://127.0.0.1:*"
[security]
mode = "plain"
[[islands]]
name = "sim"
)",
                                 kSimHosts);
  for (int h = 0; h < kSimHosts; ++h) {
    toml += fmt::format(
        "[[islands.hosts]]\nname = \"s{}\"\ndevices = {}\nkind = \"sim\"\n"
        "device_memory_mb = 4\narena_mb = 2\n",
        h, kDevicesPerHost);
  }
  toml +=
      "[[islands]]\nname = \"real\"\n[[islands.hosts]]\nname = \"c0\"\ndevices = 1\n"
      "kind = \"cpu\"\ndevice_memory_mb = 16\narena_mb = 16\n";
  return toml;
}

class SimHostsTest : public ClusterTest {
 public:
  static void SetUpTestSuite() {
    config_path_ = new std::string(std::filesystem::temp_directory_path() /
                                   fmt::format("atoll-sim-hosts-{}.toml", getpid()));
    std::ofstream(*config_path_) << SimClusterToml();
    StartCluster(*config_path_);
  }
  static void TearDownTestSuite() {
    ClusterTest::TearDownTestSuite();
    std::filesystem::remove(*config_path_);
    delete config_path_;
  }
  static inline std::string* config_path_ = nullptr;
};

TEST_F(SimHostsTest, TheSimulatedHostsRunInOneProcessAndTheOthersAsTwo) {
  EXPECT_THAT(cluster_->Pid("simhosts-s0"), IsOk());
  EXPECT_FALSE(cluster_->Pid("executor-s0").ok());
  EXPECT_FALSE(cluster_->Pid("objectstore-s1").ok());
  EXPECT_THAT(cluster_->Pid("executor-c0"), IsOk());
  EXPECT_THAT(cluster_->Pid("objectstore-c0"), IsOk());
}

TEST_F(SimHostsTest, AllReducesOverASliceOfEveryHostGiveEveryDeviceTheSum) {
  auto client = Connect("sim-hosts");
  ASSERT_NE(client, nullptr);
  constexpr int kDevices = kSimHosts * kDevicesPerHost;
  auto slice = client->CreateSlice(kDevices, "sim");
  ASSERT_THAT(slice, IsOk());

  // step(x) = all_reduce_sum(x * 2) + 1, x replicated; three steps chained in one program.
  FunctionBuilder b("step");
  Value x = b.Input(DType::kF32, {3}, Sharding::Replicated());
  b.Output(b.Add(b.AllReduceSum(b.Mul(x, 2.0)), 1.0));
  auto step = client->Register(b, *slice);
  ASSERT_THAT(step, IsOk());
  ProgramBuilder p;
  Traced v = p.Arg(DType::kF32, {3});
  for (int i = 0; i < 3; ++i) v = p.Call(*step, {v})[0];
  p.Return({v});
  auto program = p.Build();
  ASSERT_THAT(program, IsOk());

  const std::vector<float> in = {1, -0.5, 0};
  std::vector<float> want = in;
  for (int i = 0; i < 3; ++i) {
    for (float& e : want) e = e * 2 * kDevices + 1;
  }
  for (int run = 0; run < 3; ++run) {
    auto submitted = client->Submit(*program, {Tensor::F32({3}, in)});
    ASSERT_THAT(submitted, IsOk());
    // The client checks that every replica of the result agrees, bit for bit.
    auto out = submitted->Wait(60s);
    ASSERT_THAT(out, IsOk());
    EXPECT_EQ(out->at(0), Tensor::F32({3}, want));
  }
}

TEST_F(SimHostsTest, AHostThatIsNotSimulatedIsRefused) {
  const CommandResult r = RunCommand({ATOLL_BIN_DIR "/atoll-simhosts", "--config", *config_path_,
                                      "--hosts", "s0,c0", "--rm", RmEndpoint()},
                                     30s);
  EXPECT_NE(r.exit_code, 0) << r.Describe();
  EXPECT_NE((r.out + r.err).find("host c0 has cpu devices"), std::string::npos) << r.Describe();
}

TEST_F(SimHostsTest, ASliceThatAsksForAKindGetsOnlyDevicesOfThatKind) {
  const Topology cluster = AskRm(RmEndpoint());
  ASSERT_EQ(cluster.kind_of.size(), size_t{kSimHosts * kDevicesPerHost + 1});
  for (const auto& [device, host] : cluster.host_of) {
    EXPECT_EQ(cluster.kind_of.at(device), host == "c0" ? "cpu" : "sim")
        << "device " << device << " of host " << host;
  }

  auto client = Connect("device-kinds");
  ASSERT_NE(client, nullptr);
  // Any island: each kind is on one island only, so the kind alone picks it.
  auto sim = client->CreateSlice(2, SliceOptions{.kind = "sim"});
  ASSERT_THAT(sim, IsOk());
  EXPECT_EQ(sim->island(), "sim");
  auto cpu = client->CreateSlice(1, SliceOptions{.kind = "cpu"});
  ASSERT_THAT(cpu, IsOk());
  EXPECT_EQ(cpu->island(), "real");
  const Topology placed = AskRm(RmEndpoint());
  for (uint32_t device : placed.slices.at(sim->id())) EXPECT_EQ(placed.kind_of.at(device), "sim");
  for (uint32_t device : placed.slices.at(cpu->id())) EXPECT_EQ(placed.kind_of.at(device), "cpu");

  // An island with no device of the kind asked for.
  auto none = client->CreateSlice(1, SliceOptions{.island = "real", .kind = "sim"});
  EXPECT_THAT(none, StatusIs(Code::kNotFound, "island 'real' has no live sim devices"));
}

// The default test cluster: cpu hosts only.
class CpuOnlyClusterTest : public ClusterTest {};

TEST_F(CpuOnlyClusterTest, ASliceOfSimDevicesIsRefusedNamingTheKind) {
  auto client = Connect("device-kinds");
  ASSERT_NE(client, nullptr);
  auto sim = client->CreateSlice(1, SliceOptions{.kind = "sim"});
  EXPECT_THAT(
      sim, StatusIs(Code::kFailedPrecondition, "no island has 1 live sim devices (largest has 0)"));
  // The same request without a kind, or of the kind there is, is placed.
  auto any = client->CreateSlice(1, SliceOptions{});
  EXPECT_THAT(any, IsOk());
  auto cpu = client->CreateMeshSlice({2}, SliceOptions{.kind = "cpu"});
  EXPECT_THAT(cpu, IsOk());
}

}  // namespace
}  // namespace atl::testing
