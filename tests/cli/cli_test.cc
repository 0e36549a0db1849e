// The `atoll` CLI end to end: `up`, `status`, `watch`, `down`, run as the real binary against
// a cluster of fake services (always) and of the real services (once they are built; the
// test is skipped, saying which binary is missing, until then). Also a LocalCluster started
// in-process, queried through the CLI.
#include <signal.h>

#include <filesystem>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/net/events.h"
#include "common/net/transport.h"
#include "common/service/ready_file.h"
#include "launcher/local_cluster.h"
#include "tests/e2e/member_context.h"
#include "tests/launcher/cluster_test_util.h"
#include "tests/launcher/subprocess.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

using testing::CommandResult;
using ::testing::HasSubstr;
using testing::RunCommand;
using ::testing::StartsWith;
using testing::TempDir;

const std::string kAtoll = ATOLL_BIN_DIR "/atoll";
const std::string kTestConfig = ATOLL_SOURCE_DIR "/config/test.toml";

enum class Services { kFake, kReal };

std::string Name(const ::testing::TestParamInfo<Services>& info) {
  return info.param == Services::kFake ? "Fake" : "Real";
}

// So that test names in ctest read "... # GetParam() = Fake".
void PrintTo(Services s, std::ostream* os) { *os << (s == Services::kFake ? "Fake" : "Real"); }

// Counts hosts and devices in `atoll status --json` output.
void CountHostsAndDevices(const nlohmann::json& status, size_t* hosts, size_t* alive,
                          size_t* devices) {
  *hosts = *alive = *devices = 0;
  for (const auto& island : status.at("islands")) {
    for (const auto& host : island.at("hosts")) {
      ++*hosts;
      *alive += host.at("alive").get<bool>() ? 1 : 0;
      *devices += host.at("devices").size();
      for (const auto& d : host.at("devices")) {
        EXPECT_EQ(d.at("kind"), "cpu");
        EXPECT_EQ(d.at("memory_bytes"), 256u << 20);
      }
    }
  }
}

class CliTest : public ::testing::TestWithParam<Services> {
 protected:
  void SetUp() override {
    if (GetParam() == Services::kFake) {
      bin_dir_ = testing::MakeFakeBinDir(dir_.path() + "/bin");
    } else {
      bin_dir_ = ATOLL_BIN_DIR;
      const std::string missing = testing::MissingServices(bin_dir_);
      ASSERT_TRUE(missing.empty()) << "not built in " << bin_dir_ << ": " << missing;
    }
    state_dir_ = dir_.path() + "/state";
  }

  CommandResult Atoll(std::vector<std::string> args,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    args.insert(args.begin(), {kAtoll, "--state-dir", state_dir_});
    return RunCommand(args, timeout);
  }

  // `atoll status --json`, parsed; checks the test topology: 4 hosts, all alive, 8 devices.
  void ExpectStatusShowsTheTestTopology(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = extra;
    args.insert(args.end(), {"status", "--json"});
    const CommandResult r = Atoll(args);
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    const auto status = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(status.is_discarded()) << r.out;
    EXPECT_EQ(status.at("islands").size(), 2u);
    size_t hosts, alive, devices;
    CountHostsAndDevices(status, &hosts, &alive, &devices);
    EXPECT_EQ(hosts, 4u) << r.out;
    EXPECT_EQ(alive, 4u) << r.out;
    EXPECT_EQ(devices, 8u) << r.out;
  }

  // Runs `atoll watch --json --count 1` while publishing "test.ping" events to events_in;
  // checks that one arrives as a JSON line.
  void ExpectWatchSeesAnEvent(const std::string& events_in) {
    testing::Subprocess watch({kAtoll, "--state-dir", state_dir_, "watch", "--json", "--count", "1",
                               "--timeout-s", "20", "--topic", "test."});
    // Publishing takes a member's key on a cluster with CURVE keys.
    const std::string keys = state_dir_ + "/keys";
    testing::MemberContext context(std::filesystem::exists(keys) ? keys : "plain");
    EventPublisher publisher(context, "cli_test");
    ASSERT_THAT(publisher.Connect(events_in), IsOk());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(25);
    int64_t n = 0;
    // SUB sockets miss what is published before they are connected: publish until it exits.
    while (!watch.Poll(std::chrono::milliseconds(50)) &&
           std::chrono::steady_clock::now() < deadline) {
      publisher.Publish("device.noise", {{"n", n}});  // filtered out by --topic
      publisher.Publish("test.ping", {{"n", n++}, {"note", std::string("hello")}});
    }
    const CommandResult r = watch.Wait(std::chrono::seconds(1));
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    const auto line = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(line.is_discarded()) << r.out;
    EXPECT_EQ(line.at("topic"), "test.ping");
    EXPECT_EQ(line.at("src"), "cli_test");
    EXPECT_EQ(line.at("note"), "hello");
    EXPECT_TRUE(line.contains("n"));
    EXPECT_TRUE(line.contains("ts_us"));
    EXPECT_THAT(r.out, StartsWith("{\"topic\":\"test.ping\""));
  }

  TempDir dir_;
  std::string bin_dir_;
  std::string state_dir_;
};

TEST_P(CliTest, UpStatusWatchDown) {
  const CommandResult up = Atoll({"up", "--config", kTestConfig, "--bin-dir", bin_dir_});
  ASSERT_EQ(up.exit_code, 0) << up.Describe();
  EXPECT_THAT(up.out, HasSubstr("2 islands, 4 hosts, 8 devices, 11 processes"));
  EXPECT_THAT(up.out, HasSubstr("stop it with: atoll down --state-dir " + state_dir_));

  // The services outlive `atoll up`.
  auto info = ReadClusterInfo(state_dir_);
  ASSERT_THAT(info, IsOk());
  ASSERT_EQ(info->processes.size(), 11u);
  EXPECT_EQ(RunningProcesses(*info).size(), 11u);

  ExpectStatusShowsTheTestTopology();
  ASSERT_NE(info->supervisor.pid, 0);
  EXPECT_TRUE(proc::IsProgram(static_cast<pid_t>(info->supervisor.pid), "atoll"));
  EXPECT_THAT(up.out, HasSubstr("supervisor pid " + std::to_string(info->supervisor.pid)));
  const CommandResult text = Atoll({"status"});
  EXPECT_EQ(text.exit_code, 0) << text.Describe();
  EXPECT_THAT(text.out, HasSubstr("2 islands, 4 hosts (4 alive), 8 devices"));
  EXPECT_THAT(text.out, HasSubstr("host i1h1"));

  ExpectWatchSeesAnEvent(info->events_in);

  const CommandResult again = Atoll({"up", "--config", kTestConfig, "--bin-dir", bin_dir_});
  EXPECT_EQ(again.exit_code, 1) << again.Describe();
  EXPECT_THAT(again.err, StartsWith("atoll: "));
  EXPECT_THAT(again.err, HasSubstr("a cluster is already running"));

  const CommandResult down = Atoll({"down"});
  ASSERT_EQ(down.exit_code, 0) << down.Describe();
  EXPECT_THAT(down.out, HasSubstr("stopped 11 processes"));
  for (const auto& p : info->processes) {
    EXPECT_FALSE(proc::IsRunning(static_cast<pid_t>(p.pid))) << p.name;
  }
  EXPECT_FALSE(proc::IsRunning(static_cast<pid_t>(info->supervisor.pid)))
      << "down stops the supervisor too";
  EXPECT_FALSE(std::filesystem::exists(ClusterInfoPath(state_dir_)));

  const CommandResult status = Atoll({"status"});
  EXPECT_EQ(status.exit_code, 1) << status.Describe();
  EXPECT_THAT(status.err, StartsWith("atoll: no cluster running"));
  const CommandResult down_again = Atoll({"down"});
  EXPECT_EQ(down_again.exit_code, 0) << down_again.Describe();
  EXPECT_THAT(down_again.out, HasSubstr("nothing to stop"));
}

// `atoll up`'s supervisor restarts a SIGKILLed scheduler, `atoll status` counts it, and
// `atoll down` still stops everything once the supervisor itself was SIGKILLed.
TEST_P(CliTest, UpRestartsACrashedServiceAndStatusCountsIt) {
  const CommandResult up = Atoll({"up", "--config", kTestConfig, "--bin-dir", bin_dir_});
  ASSERT_EQ(up.exit_code, 0) << up.Describe();
  auto info = ReadClusterInfo(state_dir_);
  ASSERT_THAT(info, IsOk());
  const ProcessInfo scheduler = *info->Find("scheduler-island0");

  const CommandResult before = Atoll({"status", "--json"});
  ASSERT_EQ(before.exit_code, 0) << before.Describe();
  const auto services = nlohmann::json::parse(before.out).at("services");
  ASSERT_EQ(services.size(), 11u) << before.out;
  for (const auto& s : services) EXPECT_EQ(s.at("restarts"), 0) << s;

  ASSERT_EQ(kill(static_cast<pid_t>(scheduler.pid), SIGKILL), 0);
  // Back: cluster.toml names a new pid, counted, whose ready file is written.
  int64_t new_pid = 0;
  const bool back = testing::WaitFor(
      [&] {
        auto now = ReadClusterInfo(state_dir_);
        if (!now.ok()) return false;
        const ProcessInfo* p = now->Find("scheduler-island0");
        auto ready = ReadReadyFile(state_dir_ + "/run/scheduler-island0.ready");
        if (p->pid == 0 || p->pid == scheduler.pid || p->restarts != 1 || !ready.ok() ||
            ready->at("pid") != std::to_string(p->pid)) {
          return false;
        }
        new_pid = p->pid;
        return p->endpoints == scheduler.endpoints;
      },
      20000);
  ASSERT_TRUE(back) << "scheduler-island0 did not come back on its endpoint within 20 s; "
                    << "supervisor log:\n"
                    << testing::RunCommand({"/bin/cat", info->supervisor.log}).out;
  EXPECT_TRUE(proc::IsRunning(static_cast<pid_t>(new_pid)));

  const CommandResult text = Atoll({"status"});
  ASSERT_EQ(text.exit_code, 0) << text.Describe();
  EXPECT_THAT(text.out, HasSubstr("restarts: rm 0, objectstore-i0h0 0"));
  EXPECT_THAT(text.out, HasSubstr("scheduler-island0 1, scheduler-island1 0"));
  const CommandResult json = Atoll({"status", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.Describe();
  const nlohmann::json status = nlohmann::json::parse(json.out);
  for (const auto& s : status.at("services")) {
    EXPECT_EQ(s.at("restarts"), s.at("name") == "scheduler-island0" ? 1 : 0) << s;
    if (s.at("name") == "scheduler-island0") {
      EXPECT_EQ(s.at("pid"), new_pid);
    }
  }
  // --rm bypasses the state dir: no services to show.
  const CommandResult direct =
      RunCommand({kAtoll, "--state-dir", dir_.path() + "/elsewhere", "--rm", info->rm_endpoint,
                  "--keys", state_dir_ + "/keys", "status"});
  ASSERT_EQ(direct.exit_code, 0) << direct.Describe();
  EXPECT_THAT(direct.out, ::testing::Not(HasSubstr("restarts:")));

  // Without its supervisor the cluster runs on, and `down` stops it all the same.
  ASSERT_EQ(kill(static_cast<pid_t>(info->supervisor.pid), SIGKILL), 0);
  ASSERT_TRUE(testing::WaitFor(
      [&] { return !proc::IsRunning(static_cast<pid_t>(info->supervisor.pid)); }, 5000));
  const CommandResult down = Atoll({"down"});
  ASSERT_EQ(down.exit_code, 0) << down.Describe();
  EXPECT_THAT(down.out, HasSubstr("stopped 11 processes"));
  EXPECT_THAT(down.out, HasSubstr("the supervisor was gone already"));
  EXPECT_FALSE(proc::IsRunning(static_cast<pid_t>(new_pid)));
  for (const auto& p : info->processes) {
    EXPECT_FALSE(proc::IsRunning(static_cast<pid_t>(p.pid))) << p.name;
  }
  EXPECT_FALSE(std::filesystem::exists(ClusterInfoPath(state_dir_)));
}

TEST_P(CliTest, LocalClusterQueriedThroughTheCli) {
  LocalClusterOptions options;
  options.config_path = kTestConfig;
  options.state_dir = state_dir_;
  options.bin_dir = bin_dir_;
  LocalCluster cluster(options);
  const Status started = cluster.Start();
  ASSERT_THAT(started, IsOk());
  auto info = ReadClusterInfo(state_dir_);
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->rm_endpoint, cluster.info().rm_endpoint);
  EXPECT_EQ(info->processes.size(), 11u);

  ExpectStatusShowsTheTestTopology();
  // --rm bypasses the state dir.
  const std::string elsewhere = dir_.path() + "/elsewhere";
  const CommandResult r = RunCommand({kAtoll, "--state-dir", elsewhere, "--rm", info->rm_endpoint,
                                      "--keys", cluster.keys_dir(), "status"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  ExpectWatchSeesAnEvent(info->events_in);

  const Status stopped = cluster.Stop();
  EXPECT_THAT(stopped, IsOk());
  for (const auto& p : info->processes) {
    EXPECT_FALSE(proc::IsRunning(static_cast<pid_t>(p.pid))) << p.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Services, CliTest, ::testing::Values(Services::kFake, Services::kReal),
                         Name);

// Failure injection needs the fake services.
class FakeCliTest : public CliTest {};

TEST_P(FakeCliTest, UpReportsAServiceThatFailsAndLeavesNothingRunning) {
  setenv("ATOLL_FAKE_FAIL", "scheduler-island0", 1);
  const CommandResult up = Atoll({"up", "--config", kTestConfig, "--bin-dir", bin_dir_});
  unsetenv("ATOLL_FAKE_FAIL");
  EXPECT_EQ(up.exit_code, 1) << up.Describe();
  EXPECT_THAT(up.err, StartsWith("atoll: up: scheduler-island0"));
  EXPECT_THAT(up.err, HasSubstr("boom"));
  EXPECT_TRUE(testing::ProcessesStartedFrom(bin_dir_).empty());
  EXPECT_FALSE(std::filesystem::exists(ClusterInfoPath(state_dir_)));
}

INSTANTIATE_TEST_SUITE_P(Services, FakeCliTest, ::testing::Values(Services::kFake), Name);

// Commands that need no cluster.
class CliErrorsTest : public ::testing::Test {
 protected:
  TempDir dir_;
};

TEST_F(CliErrorsTest, StatusWithoutAClusterSaysSo) {
  const CommandResult r = RunCommand({kAtoll, "--state-dir", dir_.path(), "status"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, StartsWith("atoll: no cluster running: "));
  EXPECT_THAT(r.err, HasSubstr("atoll up"));
}

TEST_F(CliErrorsTest, StatusFromAnRmThatNeverAnswersTimesOut) {
  zmq::context_t context(1);
  auto silent = net::MakeSocket(context, zmq::socket_type::router);
  auto endpoint = net::Bind(silent, "tcp://127.0.0.1:*");
  ASSERT_THAT(endpoint, IsOk());
  const CommandResult r = RunCommand(
      {kAtoll, "--rm", *endpoint, "--state-dir", dir_.path(), "status", "--timeout-ms", "300"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, StartsWith("atoll: RM at " + *endpoint + " did not answer within 300 ms"));
}

TEST_F(CliErrorsTest, StateDirOptionWorksAfterTheSubcommandToo) {
  const CommandResult r = RunCommand({kAtoll, "status", "--state-dir", dir_.path()});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr(dir_.path() + "/cluster.toml"));
}

TEST_F(CliErrorsTest, WatchWithCountFailsWhenTooFewEventsArrive) {
  zmq::context_t context(1);
  auto xpub = net::MakeSocket(context, zmq::socket_type::xpub);
  auto endpoint = net::Bind(xpub, "tcp://127.0.0.1:*");
  ASSERT_THAT(endpoint, IsOk());
  const CommandResult r =
      RunCommand({kAtoll, "--rm", "tcp://127.0.0.1:1", "--events", *endpoint, "--state-dir",
                  dir_.path(), "watch", "--count", "1", "--timeout-s", "0.3"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("0 of 1 events arrived within 0.3 s"));
}

TEST_F(CliErrorsTest, WatchStopsOnSigint) {
  zmq::context_t context(1);
  auto xpub = net::MakeSocket(context, zmq::socket_type::xpub);
  auto endpoint = net::Bind(xpub, "tcp://127.0.0.1:*");
  ASSERT_THAT(endpoint, IsOk());
  testing::Subprocess watch({kAtoll, "--rm", "tcp://127.0.0.1:1", "--events", *endpoint,
                             "--state-dir", dir_.path(), "watch"});
  // Its subscription reaching the XPUB socket shows it is up and waiting.
  auto sub = net::RecvFrames(xpub, std::chrono::seconds(10));
  ASSERT_TRUE(sub.ok() && *sub) << "watch never subscribed";
  kill(watch.pid(), SIGINT);
  const CommandResult r = watch.Wait(std::chrono::seconds(5));
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
}

TEST_F(CliErrorsTest, UsageErrorsExitOne) {
  const CommandResult none = RunCommand({kAtoll});
  EXPECT_EQ(none.exit_code, 1) << none.Describe();
  EXPECT_THAT(none.err, StartsWith("atoll: "));
  const CommandResult bad = RunCommand({kAtoll, "status", "--no-such-flag"});
  EXPECT_EQ(bad.exit_code, 1) << bad.Describe();
  const CommandResult help = RunCommand({kAtoll, "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.Describe();
  for (const char* cmd : {"up", "down", "status", "watch", "submit"}) {
    EXPECT_THAT(help.out, HasSubstr(cmd));
  }
}

}  // namespace
}  // namespace atl
