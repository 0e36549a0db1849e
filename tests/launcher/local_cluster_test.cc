// LocalCluster and cluster.toml, with fake services (fake_service.cc) standing in for the
// real ones: start order and arguments, ready files, failures reported with the service's
// log, timeouts, stopping (SIGTERM, then SIGKILL), refusing a second cluster, and never
// leaking a process.
#include "launcher/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/launcher/cluster_test_util.h"
#include "tests/launcher/subprocess.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

using ::testing::HasSubstr;
using testing::kTestConfig;
using testing::MakeFakeBinDir;
using testing::ProcessesStartedFrom;
using testing::ReadFile;
using testing::TempDir;
using testing::WaitFor;

// Sets an environment variable for one test (the fake services read it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

class LocalClusterTest : public ::testing::Test {
 protected:
  LocalClusterOptions Options() {
    LocalClusterOptions o;
    o.config_path = kTestConfig;
    o.state_dir = dir_.path() + "/state";
    o.bin_dir = bin_dir_;
    o.ready_timeout = std::chrono::seconds(10);
    o.stop_timeout = std::chrono::seconds(5);
    return o;
  }
  void TearDown() override {
    EXPECT_TRUE(WaitFor([&] { return ProcessesStartedFrom(bin_dir_).empty(); }, 2000))
        << "a fake service outlived its test";
  }

  TempDir dir_;
  std::string bin_dir_ = MakeFakeBinDir(dir_.path() + "/bin");
};

TEST(ClusterInfoTest, RoundTripsThroughClusterToml) {
  TempDir dir;
  ClusterInfo info;
  info.state_dir = dir.path();
  info.config_path = "/path with spaces/\"quoted\"\\local.toml";
  info.rm_endpoint = "tcp://127.0.0.1:5550";
  info.events_in = "tcp://127.0.0.1:5551";
  info.events_out = "tcp://127.0.0.1:5552";
  info.started_at_us = 1234567890123456;
  info.processes.push_back({"rm",
                            "rm",
                            "",
                            "/bin/atoll-rm",
                            42,
                            "/logs/rm.log",
                            {{"endpoint", "tcp://127.0.0.1:5550"}, {"events_in", "x"}}});
  info.processes.push_back({"executor-i0h0",
                            "executor",
                            "i0h0",
                            "/bin/atoll-executor",
                            43,
                            "/logs/executor-i0h0.log",
                            {},
                            3});
  info.supervisor.name = "supervisor";
  info.supervisor.program = "/bin/atoll";
  info.supervisor.pid = 41;
  info.supervisor.log = "/logs/s";
  ASSERT_THAT(WriteClusterInfo(info), IsOk());

  auto read = ReadClusterInfo(dir.path());
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->state_dir, dir.path());
  EXPECT_EQ(read->config_path, info.config_path);
  EXPECT_EQ(read->rm_endpoint, info.rm_endpoint);
  EXPECT_EQ(read->events_in, info.events_in);
  EXPECT_EQ(read->events_out, info.events_out);
  EXPECT_EQ(read->started_at_us, info.started_at_us);
  ASSERT_EQ(read->processes.size(), 2u);
  EXPECT_EQ(read->processes[0].endpoints, info.processes[0].endpoints);
  EXPECT_EQ(read->processes[1].name, "executor-i0h0");
  EXPECT_EQ(read->processes[1].target, "i0h0");
  EXPECT_EQ(read->processes[1].pid, 43);
  EXPECT_EQ(read->processes[0].restarts, 0);
  EXPECT_EQ(read->processes[1].restarts, 3);
  EXPECT_EQ(read->supervisor.pid, 41);
  EXPECT_EQ(read->supervisor.program, "/bin/atoll");
  EXPECT_EQ(read->supervisor.log, "/logs/s");
  ASSERT_NE(read->Find("rm"), nullptr);
  EXPECT_EQ(read->Find("nope"), nullptr);

  ASSERT_THAT(RemoveClusterInfo(dir.path()), IsOk());
  EXPECT_EQ(ReadClusterInfo(dir.path()).status().code(), Code::kNotFound);
  EXPECT_THAT(RemoveClusterInfo(dir.path()), IsOk());  // nothing to remove is fine
}

TEST(ClusterInfoTest, GarbageIsInvalidArgument) {
  TempDir dir;
  std::ofstream(ClusterInfoPath(dir.path())) << "this is = = not toml";
  EXPECT_EQ(ReadClusterInfo(dir.path()).status().code(), Code::kInvalidArgument);
}

TEST(ClusterInfoTest, DefaultStateDirFollowsTheEnvironment) {
  const char* old_home = getenv("HOME");
  const std::string saved_home = old_home ? old_home : "";
  setenv("ATOLL_HOME", "/somewhere/atoll", 1);
  EXPECT_EQ(DefaultStateDir(), "/somewhere/atoll");
  unsetenv("ATOLL_HOME");
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(DefaultStateDir(), "/home/someone/.atoll");
  unsetenv("HOME");
  EXPECT_EQ(DefaultStateDir(), "/tmp/atoll-" + std::to_string(getuid()));
  if (old_home) setenv("HOME", saved_home.c_str(), 1);
}

TEST_F(LocalClusterTest, StartsEveryServiceInOrderAndStopsThemAll) {
  LocalCluster cluster(Options());
  const Status started = cluster.Start();
  ASSERT_THAT(started, IsOk());

  const ClusterInfo& info = cluster.info();
  std::vector<std::string> names;
  for (const auto& p : info.processes) names.push_back(p.name);
  EXPECT_THAT(names, ::testing::ElementsAre("rm", "objectstore-i0h0", "objectstore-i0h1",
                                            "objectstore-i1h0", "objectstore-i1h1", "executor-i0h0",
                                            "executor-i0h1", "executor-i1h0", "executor-i1h1",
                                            "scheduler-island0", "scheduler-island1"));
  EXPECT_THAT(info.rm_endpoint, ::testing::StartsWith("tcp://127.0.0.1:"));
  EXPECT_NE(info.rm_endpoint, "tcp://127.0.0.1:*");
  EXPECT_NE(info.events_in, info.events_out);

  // cluster.toml says the same, and every recorded pid runs its program.
  auto recorded = ReadClusterInfo(Options().state_dir);
  ASSERT_THAT(recorded, IsOk());
  EXPECT_EQ(recorded->rm_endpoint, info.rm_endpoint);
  EXPECT_EQ(recorded->events_out, info.events_out);
  EXPECT_EQ(recorded->config_path, kTestConfig);
  ASSERT_EQ(recorded->processes.size(), 11u);
  EXPECT_EQ(RunningProcesses(*recorded).size(), 11u);
  EXPECT_EQ(recorded->Find("objectstore-i1h0")->endpoints.at("arena"), "/atoll-fake-i1h0");
  EXPECT_EQ(recorded->Find("executor-i1h1")->endpoints.at("control"), "tcp://127.0.0.1:2");

  // Each service got the contract's arguments (the fake logs its command line).
  const std::string executor_log = ReadFile(info.Find("executor-i0h1")->log);
  EXPECT_THAT(executor_log, HasSubstr("--host i0h1"));
  EXPECT_THAT(executor_log, HasSubstr("--store tcp://127.0.0.1:3"));
  EXPECT_THAT(executor_log, HasSubstr("--rm " + info.rm_endpoint));
  EXPECT_THAT(executor_log, HasSubstr("--events-in " + info.events_in));
  EXPECT_THAT(ReadFile(info.Find("scheduler-island1")->log), HasSubstr("--island island1"));
  // Executors start with OpenBLAS told to keep no threads of its own.
  auto environment = [&](const std::string& name) {
    std::string env = ReadFile("/proc/" + std::to_string(info.Find(name)->pid) + "/environ");
    std::replace(env.begin(), env.end(), '\0', '\n');
    return "\n" + env;
  };
  EXPECT_THAT(environment("executor-i1h0"), HasSubstr("\nOPENBLAS_NUM_THREADS=1\n"));
  EXPECT_THAT(environment("executor-i1h0"), HasSubstr("\nPATH="));  // and the launcher's own
  EXPECT_THAT(environment("scheduler-island0"),
              ::testing::Not(HasSubstr("\nOPENBLAS_NUM_THREADS=1\n")));

  std::vector<pid_t> pids;
  for (const auto& p : info.processes) pids.push_back(static_cast<pid_t>(p.pid));
  const Status stopped = cluster.Stop();
  EXPECT_THAT(stopped, IsOk());
  for (pid_t pid : pids) EXPECT_FALSE(proc::IsRunning(pid)) << pid;
  EXPECT_EQ(ReadClusterInfo(Options().state_dir).status().code(), Code::kNotFound);
  EXPECT_TRUE(std::filesystem::is_empty(Options().state_dir + "/run")) << "ready files left";
  EXPECT_THAT(ReadFile(info.Find("executor-i0h1")->log), HasSubstr("stopped"));
  EXPECT_THAT(cluster.Stop(), IsOk());  // idempotent
}

TEST_F(LocalClusterTest, AServiceThatExitsEarlyIsReportedWithItsLog) {
  ScopedEnv fail("ATOLL_FAKE_FAIL", "executor-i0h1");
  LocalCluster cluster(Options());
  const Status s = cluster.Start();
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("executor-i0h1"));
  EXPECT_THAT(s.message(), HasSubstr("exited with status 3"));
  EXPECT_THAT(s.message(), HasSubstr(Options().state_dir + "/logs/executor-i0h1.log"));
  EXPECT_THAT(s.message(), HasSubstr("boom, failing on purpose"));
  // Everything started before it (rm, stores, other executors) is stopped already.
  EXPECT_TRUE(ProcessesStartedFrom(bin_dir_).empty());
  EXPECT_EQ(ReadClusterInfo(Options().state_dir).status().code(), Code::kNotFound);
}

TEST_F(LocalClusterTest, AServiceThatNeverGetsReadyTimesOut) {
  ScopedEnv hang("ATOLL_FAKE_HANG", "scheduler-island1");
  auto options = Options();
  // Every service has this long: under a loaded suite the others (fakes) took over 500 ms.
  options.ready_timeout = std::chrono::milliseconds(2000);
  LocalCluster cluster(options);
  const auto start = std::chrono::steady_clock::now();
  const Status s = cluster.Start();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("scheduler-island1 was not ready within 2000 ms"));
  EXPECT_THAT(s.message(), HasSubstr("logs/scheduler-island1.log"));
  EXPECT_TRUE(ProcessesStartedFrom(bin_dir_).empty());
}

TEST_F(LocalClusterTest, TheRmFailingStopsEverything) {
  ScopedEnv fail("ATOLL_FAKE_FAIL", "rm");
  LocalCluster cluster(Options());
  const Status s = cluster.Start();
  EXPECT_THAT(s.message(), HasSubstr("rm ("));
  EXPECT_THAT(s.message(), HasSubstr("logs/rm.log"));
}

TEST_F(LocalClusterTest, AMissingBinaryIsNamedBeforeAnythingStarts) {
  std::filesystem::remove(bin_dir_ + "/atoll-scheduler");
  LocalCluster cluster(Options());
  const Status s = cluster.Start();
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("atoll-scheduler not found in " + bin_dir_));
  EXPECT_FALSE(std::filesystem::exists(Options().state_dir + "/logs/rm.log"));
}

TEST_F(LocalClusterTest, ABadConfigIsInvalidArgument) {
  auto options = Options();
  options.config_path = dir_.path() + "/missing.toml";
  LocalCluster cluster(options);
  EXPECT_EQ(cluster.Start().code(), Code::kInvalidArgument);
}

TEST_F(LocalClusterTest, RefusesASecondClusterInTheSameStateDir) {
  LocalCluster first(Options());
  ASSERT_THAT(first.Start(), IsOk());
  {
    LocalCluster second(Options());
    const Status s = second.Start();
    EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("a cluster is already running"));
    EXPECT_THAT(s.message(), HasSubstr("atoll stop"));
  }
  // The refusal did not disturb the running cluster.
  EXPECT_EQ(RunningProcesses(*ReadClusterInfo(Options().state_dir)).size(), 11u);
  ASSERT_THAT(first.Stop(), IsOk());

  // A cluster.toml whose processes are all gone is stale and does not block a new start.
  ClusterInfo stale = first.info();
  ASSERT_THAT(WriteClusterInfo(stale), IsOk());
  LocalCluster third(Options());
  const Status s = third.Start();
  EXPECT_THAT(s, IsOk());
}

TEST_F(LocalClusterTest, TheDestructorStopsEverything) {
  std::vector<pid_t> pids;
  {
    LocalCluster cluster(Options());
    ASSERT_THAT(cluster.Start(), IsOk());
    for (const auto& p : cluster.info().processes) pids.push_back(static_cast<pid_t>(p.pid));
  }
  for (pid_t pid : pids) EXPECT_FALSE(proc::IsRunning(pid)) << pid;
}

TEST_F(LocalClusterTest, StopKillsAServiceThatIgnoresSigterm) {
  ScopedEnv ignore("ATOLL_FAKE_IGNORE_TERM", "executor-i1h0");
  auto options = Options();
  options.stop_timeout = std::chrono::milliseconds(300);
  LocalCluster cluster(options);
  ASSERT_THAT(cluster.Start(), IsOk());
  const Status s = cluster.Stop();
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_THAT(s.message(),
              HasSubstr("executor-i1h0 did not exit within 300 ms of SIGTERM and was killed"));
  EXPECT_THAT(s.message(), ::testing::Not(HasSubstr("executor-i0h0")));
}

TEST_F(LocalClusterTest, ACrashedServiceIsReportedByStopButAKilledOneIsNot) {
  LocalCluster cluster(Options());
  ASSERT_THAT(cluster.Start(), IsOk());
  // Killed on purpose through Signal(): expected, not reported.
  ASSERT_THAT(cluster.Signal("executor-i0h0", SIGKILL), IsOk());
  ASSERT_TRUE(WaitFor([&] { return cluster.ExitStatus("executor-i0h0")->has_value(); }, 2000));
  auto exit = *cluster.ExitStatus("executor-i0h0");
  EXPECT_TRUE(exit->signaled);
  EXPECT_EQ(exit->code, SIGKILL);
  EXPECT_EQ(cluster.Pid("executor-i0h0").status().code(), Code::kNotFound);
  // Killed behind its back: a crash (SIGABRT, as a failed assertion ends a process; not
  // SIGSEGV, which a sanitized build's own handler would turn into a report and exit 1).
  kill(*cluster.Pid("objectstore-i1h1"), SIGABRT);
  const Status s = cluster.Stop();
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("objectstore-i1h1 was killed by signal 6"));
  EXPECT_THAT(s.message(), ::testing::Not(HasSubstr("executor-i0h0")));
}

TEST_F(LocalClusterTest, StopRecordedClusterStopsAnotherProcesssCluster) {
  LocalCluster cluster(Options());
  ASSERT_THAT(cluster.Start(), IsOk());
  auto info = ReadClusterInfo(Options().state_dir);
  ASSERT_THAT(info, IsOk());
  auto summary = StopRecordedCluster(*info, std::chrono::seconds(5));
  ASSERT_THAT(summary, IsOk());
  EXPECT_EQ(summary->stopped.size(), 11u);
  EXPECT_TRUE(summary->killed.empty());
  EXPECT_TRUE(summary->not_running.empty());
  EXPECT_EQ(ReadClusterInfo(Options().state_dir).status().code(), Code::kNotFound);
  EXPECT_TRUE(std::filesystem::is_empty(Options().state_dir + "/run")) << "ready files left";
  EXPECT_THAT(cluster.Stop(), IsOk()) << "every service exited 0 on SIGTERM";
}

TEST_F(LocalClusterTest, StopRecordedClusterNeverSignalsARecycledPid) {
  // A pid recorded as atoll-rm that now runs something else is left alone.
  testing::Subprocess sleeper({"/bin/sleep", "30"});
  ClusterInfo info;
  info.state_dir = dir_.path();
  info.rm_endpoint = "tcp://127.0.0.1:1";
  info.processes.push_back({"rm", "rm", "", "/bin/atoll-rm", sleeper.pid(), "", {}});
  ASSERT_THAT(WriteClusterInfo(info), IsOk());
  EXPECT_TRUE(RunningProcesses(info).empty());
  auto summary = StopRecordedCluster(info, std::chrono::milliseconds(200));
  ASSERT_THAT(summary, IsOk());
  EXPECT_THAT(summary->not_running, ::testing::ElementsAre("rm"));
  EXPECT_TRUE(proc::IsRunning(sleeper.pid()));
  EXPECT_FALSE(std::filesystem::exists(ClusterInfoPath(dir_.path())));
}

// Runs `spawn` to its end (5 s at most), which must be clean; returns its log's last lines.
std::string RunToCleanEnd(const proc::SpawnOptions& spawn) {
  auto pid = proc::Spawn(spawn);
  if (!pid.ok()) {
    ADD_FAILURE() << pid.status().ToString();
    return "";
  }
  std::optional<proc::ExitInfo> exit;
  if (!WaitFor([&] { return (exit = *proc::TryReap(*pid)).has_value(); }, 5000)) {
    ADD_FAILURE() << "the child did not end within 5 s";
    return "";
  }
  EXPECT_TRUE(exit->clean()) << exit->Describe();
  return proc::TailFile(spawn.log_path, 10);
}

TEST(ProcessTest, SpawnReportsAProgramThatCannotRun) {
  TempDir dir;
  proc::SpawnOptions spawn;
  spawn.argv = {dir.path() + "/nothing-here"};
  spawn.log_path = dir.path() + "/log";
  EXPECT_EQ(proc::Spawn(spawn).status().code(), Code::kNotFound);
}

TEST(ProcessTest, SpawnedChildrenWriteToTheirLogAndGetNoInheritedDescriptors) {
  TempDir dir;
  proc::SpawnOptions spawn;
  spawn.argv = {"/bin/sh", "-c", "echo out; echo err >&2; ls /proc/self/fd | wc -l"};
  spawn.log_path = dir.path() + "/log";
  // stdin, stdout, stderr, and the fd `ls` opens for /proc/self/fd: nothing inherited.
  EXPECT_EQ(RunToCleanEnd(spawn), "out\nerr\n4\n");
  EXPECT_EQ(proc::TailFile(spawn.log_path, 1), "4\n");
}

TEST(ProcessTest, SpawnedChildrenGetTheLaunchersEnvironmentWithTheGivenEntriesOverIt) {
  TempDir dir;
  ScopedEnv kept("ATOLL_SPAWN_TEST_KEPT", "kept");
  ScopedEnv replaced("ATOLL_SPAWN_TEST_SET", "the launcher's");
  proc::SpawnOptions spawn;
  spawn.argv = {"/bin/sh", "-c",
                "echo \"$ATOLL_SPAWN_TEST_KEPT/$ATOLL_SPAWN_TEST_SET/$ATOLL_SPAWN_TEST_NEW\"; "
                "env | grep -c ^ATOLL_SPAWN_TEST_SET="};
  spawn.log_path = dir.path() + "/log";
  spawn.env = {"ATOLL_SPAWN_TEST_SET=the child's", "ATOLL_SPAWN_TEST_NEW=new"};
  EXPECT_EQ(RunToCleanEnd(spawn), "kept/the child's/new\n1\n");
}

TEST(ProcessTest, SpawnedChildCanBeDrivenOverPipes) {
  TempDir dir;
  int to_child[2], from_child[2];
  ASSERT_EQ(pipe2(to_child, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(from_child, O_CLOEXEC), 0);
  proc::SpawnOptions spawn;
  spawn.argv = {"/bin/sh", "-c", "read line; echo \"got $line\"; echo err >&2"};
  spawn.log_path = dir.path() + "/log";
  spawn.stdin_fd = to_child[0];
  spawn.stdout_fd = from_child[1];
  auto pid = proc::Spawn(spawn);
  close(to_child[0]);
  close(from_child[1]);
  ASSERT_THAT(pid, IsOk());
  ASSERT_EQ(write(to_child[1], "hello\n", 6), 6);
  close(to_child[1]);
  std::optional<proc::ExitInfo> exit;
  ASSERT_TRUE(WaitFor([&] { return (exit = *proc::TryReap(*pid)).has_value(); }, 5000));
  EXPECT_TRUE(exit->clean()) << exit->Describe();
  char out[64] = {};
  EXPECT_EQ(read(from_child[0], out, sizeof out - 1), 10);  // the child has ended: no wait
  close(from_child[0]);
  EXPECT_STREQ(out, "got hello\n");
  EXPECT_EQ(proc::TailFile(spawn.log_path, 10), "err\n");  // stderr still goes to the log
}

}  // namespace
}  // namespace atl
