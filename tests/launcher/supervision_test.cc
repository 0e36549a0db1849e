// LocalCluster::Supervise: a service that exits on its own is started again after its
// backoff delay, on the endpoints of its first start, with its restart counted in
// cluster.toml; with the fake services (fake_service.cc) for the bookkeeping and the backoff,
// and with the real ones for binding the same endpoints again and the store's arena.
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/net/transport.h"
#include "common/proto/protocol.h"
#include "common/service/ready_file.h"
#include "launcher/local_cluster.h"
#include "tests/e2e/member_context.h"
#include "tests/launcher/cluster_test_util.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

using ::testing::HasSubstr;
using testing::kTestConfig;
using testing::ReadFile;
using testing::TempDir;
using testing::WaitFor;

constexpr int kBackTimeoutMs = 20000;

class SupervisionTest : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("ATOLL_FAKE_FAIL_AGAIN");
    EXPECT_TRUE(WaitFor([&] { return testing::ProcessesStartedFrom(fake_bin_dir_).empty(); }, 2000))
        << "a fake service outlived its test";
  }

  LocalClusterOptions Options(const std::string& bin_dir) {
    LocalClusterOptions o;
    o.config_path = kTestConfig;
    o.state_dir = dir_.path() + "/state";
    o.bin_dir = bin_dir;
    o.ready_timeout = std::chrono::seconds(15);
    o.restart_backoff = {.initial = std::chrono::milliseconds(50),
                         .cap = std::chrono::milliseconds(400),
                         .reset_after = std::chrono::seconds(30)};
    return o;
  }

  // The pid in the service's ready file, 0 while it has none.
  int64_t ReadyPid(const std::string& name) {
    auto values = ReadReadyFile(dir_.path() + "/state/run/" + name + ".ready");
    return values.ok() && values->count("pid") ? std::stoll(values->at("pid")) : 0;
  }

  // SIGKILLs the service (behind the cluster's back, as a crash) and supervises until it
  // runs again under a new pid and has written its ready file, bounded by kBackTimeoutMs.
  // Returns the new pid; 0 (with a failure recorded) when it did not come back.
  pid_t CrashAndAwaitRestart(LocalCluster& cluster, const std::string& name) {
    auto old_pid = cluster.Pid(name);
    EXPECT_THAT(old_pid, IsOk());
    if (!old_pid.ok()) return 0;
    EXPECT_EQ(kill(*old_pid, SIGKILL), 0) << name;
    pid_t new_pid = 0;
    const bool back = WaitFor(
        [&] {
          const Status s = cluster.Supervise();
          EXPECT_THAT(s, IsOk());
          auto pid = cluster.Pid(name);
          if (!pid.ok() || *pid == *old_pid || ReadyPid(name) != *pid) return false;
          new_pid = *pid;
          // Supervise() took the ready file: cluster.toml has the pid and the endpoints.
          auto recorded = ReadClusterInfo(cluster.info().state_dir);
          return recorded.ok() && recorded->Find(name)->pid == *pid;
        },
        kBackTimeoutMs);
    EXPECT_TRUE(back) << name << " (pid " << *old_pid << ") was not running again within "
                      << kBackTimeoutMs << " ms; its log:\n"
                      << ReadFile(cluster.info().Find(name)->log);
    return back ? new_pid : 0;
  }

  TempDir dir_;
  std::string fake_bin_dir_ = testing::MakeFakeBinDir(dir_.path() + "/bin");
};

TEST_F(SupervisionTest, EachKilledServiceComesBackWhereItWasAndIsCounted) {
  LocalCluster cluster(Options(fake_bin_dir_));
  ASSERT_THAT(cluster.Start(), IsOk());
  const ClusterInfo before = cluster.info();
  for (const std::string name : {"rm", "objectstore-i0h1", "executor-i1h0", "scheduler-island0"}) {
    SCOPED_TRACE(name);
    ASSERT_NE(CrashAndAwaitRestart(cluster, name), 0);
    auto recorded = ReadClusterInfo(before.state_dir);
    ASSERT_THAT(recorded, IsOk());
    EXPECT_EQ(recorded->Find(name)->restarts, 1);
    EXPECT_EQ(recorded->Find(name)->endpoints, before.Find(name)->endpoints);
    // Its log keeps its predecessor's command line, then has the new one, which asks for
    // the old address.
    const std::string log = ReadFile(before.Find(name)->log);
    const std::string command_line = "fake " + before.Find(name)->role + ": --config";
    const auto first = log.find(command_line);
    ASSERT_NE(first, std::string::npos) << log;
    const auto second = log.find(command_line, first + 1);
    ASSERT_NE(second, std::string::npos) << log;
    const auto& endpoints = before.Find(name)->endpoints;
    EXPECT_THAT(log.substr(second),
                HasSubstr(endpoints.count("endpoint") ? endpoints.at("endpoint")
                                                      : endpoints.at("control")));
  }
  auto recorded = ReadClusterInfo(before.state_dir);
  ASSERT_THAT(recorded, IsOk());
  EXPECT_EQ(recorded->rm_endpoint, before.rm_endpoint);
  EXPECT_EQ(recorded->Find("executor-i0h0")->restarts, 0);
  EXPECT_EQ(RunningProcesses(*recorded).size(), 11u);
  EXPECT_THAT(cluster.Stop(), IsOk());
}

TEST_F(SupervisionTest, AServiceStoppedOnPurposeIsNotRestarted) {
  LocalCluster cluster(Options(fake_bin_dir_));
  ASSERT_THAT(cluster.Start(), IsOk());
  ASSERT_THAT(cluster.Signal("executor-i0h0", SIGTERM), IsOk());
  ASSERT_TRUE(WaitFor(
      [&] {
        EXPECT_THAT(cluster.Supervise(), IsOk());
        return cluster.ExitStatus("executor-i0h0")->has_value();
      },
      5000));
  // Several backoff delays' worth of passes: nothing starts it again.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_THAT(cluster.Supervise(), IsOk());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(cluster.Pid("executor-i0h0").status().code(), Code::kNotFound);
  EXPECT_EQ(cluster.info().Find("executor-i0h0")->restarts, 0);
}

TEST_F(SupervisionTest, TheBackoffGrowsForAServiceThatKeepsCrashing) {
  setenv("ATOLL_FAKE_FAIL_AGAIN", "scheduler-island1", 1);  // fails every restart
  LocalCluster cluster(Options(fake_bin_dir_));
  ASSERT_THAT(cluster.Start(), IsOk());
  ASSERT_EQ(kill(*cluster.Pid("scheduler-island1"), SIGKILL), 0);
  // When each restart happened, as Supervise() counted it.
  std::vector<std::chrono::steady_clock::time_point> restarted;
  const bool five = WaitFor(
      [&] {
        EXPECT_THAT(cluster.Supervise(), IsOk());
        const int64_t restarts = cluster.info().Find("scheduler-island1")->restarts;
        if (restarts > static_cast<int64_t>(restarted.size())) {
          restarted.push_back(std::chrono::steady_clock::now());
        }
        return restarted.size() >= 5;
      },
      10000);
  ASSERT_TRUE(five) << "only " << restarted.size() << " restarts within 10 s";
  EXPECT_EQ(cluster.info().Find("scheduler-island1")->restarts, 5) << "one restart per pass";
  // Restart k+1 waits for its delay after restart k exits: 100, 200, 400, 400 ms (50 ms
  // doubling, 400 ms cap; restart 1 came 50 ms after the kill).
  const std::vector<int64_t> delays_ms = {100, 200, 400, 400};
  for (size_t k = 0; k + 1 < restarted.size(); ++k) {
    const auto gap =
        std::chrono::duration_cast<std::chrono::milliseconds>(restarted[k + 1] - restarted[k]);
    EXPECT_GE(gap.count(), delays_ms[k]) << "between restarts " << k + 1 << " and " << k + 2;
  }
  EXPECT_THAT(ReadFile(cluster.info().Find("scheduler-island1")->log),
              HasSubstr("boom, failing on purpose"));
  auto recorded = ReadClusterInfo(cluster.info().state_dir);
  ASSERT_THAT(recorded, IsOk());
  EXPECT_GE(recorded->Find("scheduler-island1")->restarts, 4);
  // Crash-looping is not a clean stop.
  EXPECT_EQ(cluster.Stop().code(), Code::kInternal);
}

// The real services: bound again on their old addresses, the RM with its state, the store
// with a new arena (the dead one's unlinked).
TEST_F(SupervisionTest, RealServicesComeBackOnTheirEndpoints) {
  const std::string missing = testing::MissingServices(ATOLL_BIN_DIR);
  ASSERT_TRUE(missing.empty()) << "not built in " << ATOLL_BIN_DIR << ": " << missing;
  LocalCluster cluster(Options(ATOLL_BIN_DIR));
  const Status started = cluster.Start();
  ASSERT_THAT(started, IsOk());
  const ClusterInfo before = cluster.info();
  const std::string old_arena = before.Find("objectstore-i0h1")->endpoints.at("arena");
  ASSERT_TRUE(std::filesystem::exists("/dev/shm" + old_arena));

  for (const std::string name : {"scheduler-island0", "objectstore-i0h1", "rm"}) {
    SCOPED_TRACE(name);
    ASSERT_NE(CrashAndAwaitRestart(cluster, name), 0);
    const ProcessInfo& now = *cluster.info().Find(name);
    EXPECT_EQ(now.restarts, 1);
    EXPECT_EQ(now.endpoints.at("endpoint"), before.Find(name)->endpoints.at("endpoint"));
  }
  const std::string new_arena = cluster.info().Find("objectstore-i0h1")->endpoints.at("arena");
  EXPECT_NE(new_arena, old_arena);
  EXPECT_FALSE(std::filesystem::exists("/dev/shm" + old_arena)) << "the dead store's arena";
  EXPECT_TRUE(std::filesystem::exists("/dev/shm" + new_arena));

  // The RM answers where it was, and the restarted scheduler registered there again.
  testing::MemberContext context(cluster.keys_dir());
  net::Requester rm(context, before.rm_endpoint);
  ASSERT_THAT(rm.Connect(), IsOk());
  bool registered = false;
  WaitFor(
      [&] {
        auto status =
            rm.Call<proto::ClusterStatus>(proto::GetClusterStatus{}, std::chrono::seconds(2));
        if (!status.ok()) return false;
        for (const auto& island : status->islands) {
          if (island.name == "island0") {
            registered = island.scheduler_alive &&
                         island.scheduler_endpoint ==
                             before.Find("scheduler-island0")->endpoints.at("endpoint");
          }
        }
        return registered;
      },
      kBackTimeoutMs);
  EXPECT_TRUE(registered) << "island0's scheduler is not alive at its old endpoint in the RM";
  EXPECT_THAT(cluster.Stop(), IsOk());
  EXPECT_FALSE(std::filesystem::exists("/dev/shm" + new_arena));
}

}  // namespace
}  // namespace atl
