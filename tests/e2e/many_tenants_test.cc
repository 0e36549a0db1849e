// Many tenants at once on the cluster `atoll up` starts (tests/e2e/many_tenants.toml): 256
// clients in one process, then 32 client processes, connect together and each run a checked
// program 20 times with 4 runs in flight, under CURVE (the default) and in plain text, one
// cluster of each started for the suite. Every run must be right, the CURVE load must take
// at most twice the plain one's time, and no service's event loop may have stalled for half
// the liveness window: a loop that stalls that long is close to having its peers declared
// lost (or being declared lost) while they are alive.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <regex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launcher/local_cluster.h"
#include "tests/e2e/tenant_load.h"
#include "tests/launcher/subprocess.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kClients = 256;
constexpr int kProcesses = 32;
constexpr int kRuns = 20;
constexpr int kInFlight = 4;
// many_tenants.toml's heartbeat and liveness: a peer silent for 2 s is lost.
constexpr auto kHeartbeat = 500ms;
constexpr auto kLivenessWindow = 4 * kHeartbeat;

struct RunningCluster {
  std::string state_dir;
  std::unique_ptr<LocalCluster> cluster;
  std::string keys_dir;  // ClientOptions::keys_dir: the keys, or "plain"
};

// The suite's config in `mode` ("curve" or "plain"), in a state dir of its own.
std::unique_ptr<RunningCluster> Start(const std::string& mode) {
  auto running = std::make_unique<RunningCluster>();
  char pattern[] = "/tmp/atoll-tenants-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return nullptr;
  running->state_dir = pattern;
  std::ifstream in(ATOLL_SOURCE_DIR "/tests/e2e/many_tenants.toml");
  std::stringstream text;
  text << in.rdbuf();
  const std::string config = running->state_dir + "/cluster-config.toml";
  std::ofstream(config) << std::regex_replace(text.str(), std::regex(R"(mode = "curve")"),
                                              "mode = \"" + mode + "\"");
  LocalClusterOptions options;
  options.config_path = config;
  options.state_dir = running->state_dir;
  options.bin_dir = ATOLL_BIN_DIR;
  running->cluster = std::make_unique<LocalCluster>(options);
  const Status started = running->cluster->Start();
  if (!started.ok()) {
    std::cerr << mode << " cluster: " << started.ToString() << "\n";
    return nullptr;
  }
  running->keys_dir = mode == "plain" ? "plain" : running->cluster->keys_dir();
  return running;
}

class ManyTenantsTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    curve_ = Start("curve").release();
    plain_ = Start("plain").release();
  }
  static void TearDownTestSuite() {
    for (RunningCluster** c : {&curve_, &plain_}) {
      if (*c == nullptr) continue;
      EXPECT_THAT((*c)->cluster->Stop(), IsOk());
      if (::testing::UnitTest::GetInstance()->failed_test_count() > 0) {
        std::cout << "the cluster's logs stay in " << (*c)->state_dir << "/logs\n";
      } else {
        std::filesystem::remove_all((*c)->state_dir);
      }
      delete *c;
      *c = nullptr;
    }
  }
  void SetUp() override {
    ASSERT_NE(curve_, nullptr);
    ASSERT_NE(plain_, nullptr);
  }

 protected:
  static TenantLoadResult InProcess(const RunningCluster& c) {
    TenantLoadOptions options;
    options.rm_endpoint = c.cluster->info().rm_endpoint;
    options.keys_dir = c.keys_dir;
    options.clients = kClients;
    options.runs = kRuns;
    options.in_flight = kInFlight;
    return RunTenants(options);
  }

  // kProcesses atoll_tenant_client processes of one client each, started together.
  static TenantLoadResult InProcesses(const RunningCluster& c) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::unique_ptr<Subprocess>> processes;
    for (int i = 0; i < kProcesses; ++i) {
      processes.push_back(std::make_unique<Subprocess>(
          std::vector<std::string>{ATOLL_TENANT_CLIENT, c.cluster->info().rm_endpoint, c.keys_dir,
                                   "1", std::to_string(kRuns), std::to_string(kInFlight)}));
    }
    TenantLoadResult total;
    for (auto& p : processes) {
      const CommandResult done = p->Wait(120s);
      TenantLoadResult one;
      const std::string last = done.out.substr(done.out.rfind('\n', done.out.size() - 2) + 1);
      if (!ParseTenantResult(done.out.empty() ? "" : last, &one)) {
        total.failed += kRuns;
        total.errors.push_back(done.Describe());
        continue;
      }
      total.connected += one.connected;
      total.ok += one.ok;
      total.failed += one.failed;
      total.wrong += one.wrong;
      if (one.failed > 0 && total.errors.size() < 5) total.errors.push_back(done.err);
    }
    total.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return total;
  }

  // Every service's event loop's longest stall, by service, from `atoll status --json`.
  static std::map<std::string, int64_t> LongestStallsUs(const RunningCluster& c) {
    // The services' figures travel on their heartbeats: wait for the ones after the load.
    std::this_thread::sleep_for(2 * kHeartbeat);
    const CommandResult status =
        RunCommand({ATOLL_BIN_DIR "/atoll", "--rm", c.cluster->info().rm_endpoint, "--keys",
                    c.keys_dir, "status", "--json"});
    std::map<std::string, int64_t> stalls;
    EXPECT_EQ(status.exit_code, 0) << status.Describe();
    if (status.exit_code != 0) return stalls;
    const auto json = nlohmann::json::parse(status.out);
    stalls["rm"] = json.at("rm_longest_stall_us").get<int64_t>();
    for (const auto& island : json.at("islands")) {
      const std::string name = island.at("name");
      stalls["scheduler-" + name] = island.at("scheduler_longest_stall_us").get<int64_t>();
      for (const auto& host : island.at("hosts")) {
        const std::string h = host.at("name");
        stalls["executor-" + h] = host.at("executor_longest_stall_us").get<int64_t>();
        stalls["objectstore-" + h] = host.at("store_longest_stall_us").get<int64_t>();
      }
    }
    return stalls;
  }

  // No service's loop stalled for half the liveness window: one that does is close to
  // missing its own heartbeats, and to not hearing its peers'.
  static void ExpectNoLongStall(const RunningCluster& c, const std::string& what) {
    const auto stalls = LongestStallsUs(c);
    EXPECT_EQ(stalls.size(), 11u) << what << ": the RM, 2 schedulers, 4 executors, 4 stores";
    int64_t longest = 0;
    for (const auto& [service, us] : stalls) {
      longest = std::max(longest, us);
      EXPECT_LT(us, std::chrono::microseconds(kLivenessWindow).count() / 2)
          << what << ": " << service << "'s event loop stalled for " << us / 1000 << " ms";
    }
    std::cout << fmt::format("{}: longest event loop stall {} ms\n", what, longest / 1000);
  }

  static void ExpectAllRight(const TenantLoadResult& r, int clients, const std::string& what) {
    std::string errors;
    for (const auto& e : r.errors) errors += "\n  " + e;
    EXPECT_EQ(r.failed, 0) << what << ": " << FormatTenantResult(r) << errors;
    EXPECT_EQ(r.wrong, 0) << what << ": " << FormatTenantResult(r) << errors;
    EXPECT_EQ(r.ok, clients * kRuns) << what << ": " << FormatTenantResult(r) << errors;
  }

  static inline RunningCluster* curve_ = nullptr;
  static inline RunningCluster* plain_ = nullptr;
};

// CURVE's time over plain text's. The target is 2 (measured 1.3 to 2.3 on 2 cores while
// other builds ran: CURVE's handshakes cost about twice plain text's CPU); the test fails
// beyond 3, which the regression it guards against (38, live clients declared dead) crosses
// by far, without failing on a loaded machine's noise. Tests assert no timing finer than that.
constexpr double kCurveSlowdownBound = 3.0;

TEST_F(ManyTenantsTest, ManyClientsOfOneProcessConnectAtOnce) {
  const TenantLoadResult curve = InProcess(*curve_);
  const TenantLoadResult plain = InProcess(*plain_);
  std::cout << fmt::format("{} clients in one process: CURVE {:.2f} s, plain {:.2f} s ({:.2f}x)\n",
                           kClients, curve.seconds, plain.seconds, curve.seconds / plain.seconds);
  ExpectAllRight(curve, kClients, "CURVE");
  ExpectAllRight(plain, kClients, "plain");
  EXPECT_LE(curve.seconds, kCurveSlowdownBound * plain.seconds);
  ExpectNoLongStall(*curve_, "CURVE");
  ExpectNoLongStall(*plain_, "plain");
}

TEST_F(ManyTenantsTest, ManyClientProcessesConnectAtOnce) {
  const TenantLoadResult curve = InProcesses(*curve_);
  const TenantLoadResult plain = InProcesses(*plain_);
  std::cout << fmt::format("{} client processes: CURVE {:.2f} s, plain {:.2f} s ({:.2f}x)\n",
                           kProcesses, curve.seconds, plain.seconds, curve.seconds / plain.seconds);
  ExpectAllRight(curve, kProcesses, "CURVE");
  ExpectAllRight(plain, kProcesses, "plain");
  EXPECT_LE(curve.seconds, kCurveSlowdownBound * plain.seconds);
  ExpectNoLongStall(*curve_, "CURVE");
  ExpectNoLongStall(*plain_, "plain");
}

}  // namespace
}  // namespace atl::testing
