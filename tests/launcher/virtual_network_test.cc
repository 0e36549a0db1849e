// VirtualNetwork: machines in network namespaces reach each other over the switch, a cut
// link drops their traffic while their connections live on, and nothing it made outlives
// it: not its namespaces, not the processes started in them, not those a killed instance
// left. Skipped, saying why, where namespaces cannot be made (no CAP_NET_ADMIN).
#include "launcher/virtual_network.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "common/net/transport.h"
#include "tests/launcher/subprocess.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

using namespace std::chrono_literals;

bool NetnsExists(const std::string& netns) {
  return std::filesystem::exists("/run/netns/" + netns);
}

// True once `pid` runs `program` inside `netns` (`ip netns exec` has exec'd it).
bool RunsInside(pid_t pid, const std::string& program, const std::string& netns) {
  struct stat ns {};
  if (stat(("/run/netns/" + netns).c_str(), &ns) != 0) return false;
  std::error_code ec_ns, ec_exe;
  const std::string proc = "/proc/" + std::to_string(pid);
  const auto in = std::filesystem::read_symlink(proc + "/ns/net", ec_ns);
  const auto exe = std::filesystem::read_symlink(proc + "/exe", ec_exe);
  return !ec_ns && !ec_exe && in.string() == "net:[" + std::to_string(ns.st_ino) + "]" &&
         exe.filename() == program;
}

// Skipped, saying why, where this machine cannot make namespaces.
class VirtualNetworkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static const Status probe = VirtualNetwork::Create({"probe"}).status();
    if (probe.code() == Code::kFailedPrecondition) GTEST_SKIP() << probe.ToString();
    ASSERT_THAT(probe, IsOk());
  }

  static std::unique_ptr<VirtualNetwork> Make(const std::vector<std::string>& machines) {
    auto network = VirtualNetwork::Create(machines);
    EXPECT_THAT(network, IsOk());
    return network.ok() ? std::move(network).value() : nullptr;
  }
};

std::string Received(zmq::socket_t& socket, std::chrono::milliseconds timeout) {
  auto frames = net::RecvFrames(socket, timeout);
  if (!frames.ok() || !frames->has_value() || (*frames)->empty()) return "";
  return (**frames)[0].to_string();
}

Status SendText(zmq::socket_t& socket, std::string_view text) {
  net::Frames frames;
  frames.emplace_back(text);
  return net::SendFrames(socket, frames);
}

TEST_F(VirtualNetworkTest, MachinesTalkOverTheSwitchAndACutLinkHoldsTheirTrafficUntilBack) {
  auto network = Make({"one", "two"});
  ASSERT_NE(network, nullptr);
  EXPECT_EQ(network->Address("one"), "10.77.0.1");
  EXPECT_EQ(network->Address("two"), "10.77.0.2");

  // Each context's I/O threads start with its first socket, in the thread's namespace then.
  ASSERT_THAT(network->Enter("two"), IsOk());
  zmq::context_t on_two;
  zmq::socket_t receiver = net::MakeSocket(on_two, zmq::socket_type::pull);
  auto bound = net::Bind(receiver, "tcp://" + network->Address("two") + ":*");
  ASSERT_THAT(bound, IsOk());
  ASSERT_THAT(network->Enter("one"), IsOk());
  zmq::context_t on_one;
  zmq::socket_t sender = net::MakeSocket(on_one, zmq::socket_type::push);
  ASSERT_THAT(net::Connect(sender, *bound), IsOk());
  ASSERT_THAT(network->Leave(), IsOk());

  ASSERT_THAT(SendText(sender, "before"), IsOk());
  EXPECT_EQ(Received(receiver, 10s), "before");

  ASSERT_THAT(network->SetLink("one", false), IsOk());
  ASSERT_THAT(SendText(sender, "during"), IsOk());
  EXPECT_EQ(Received(receiver, 500ms), "") << "a cut link let a message through";
  // The same connection carries it once the link is back (TCP retransmits it).
  ASSERT_THAT(network->SetLink("one", true), IsOk());
  EXPECT_EQ(Received(receiver, 20s), "during");
}

TEST_F(VirtualNetworkTest, ItsNamespacesAndTheProcessesInThemEndWithIt) {
  auto network = Make({"box"});
  ASSERT_NE(network, nullptr);
  const std::string netns = network->machine("box").netns;
  ASSERT_TRUE(NetnsExists(netns));
  testing::Subprocess sleeper(network->Inside("box", {"/bin/sleep", "60"}));
  ASSERT_GT(sleeper.pid(), 0);
  bool inside = false;
  for (int i = 0; i < 500 && !(inside = RunsInside(sleeper.pid(), "sleep", netns)); ++i) {
    usleep(10'000);
  }
  ASSERT_TRUE(inside) << "sleep did not start inside " << netns;

  network.reset();
  EXPECT_FALSE(NetnsExists(netns));
  const testing::CommandResult ended = sleeper.Wait(5s);
  EXPECT_FALSE(ended.timed_out);
  EXPECT_EQ(ended.exit_code, 128 + SIGKILL);
}

TEST_F(VirtualNetworkTest, NamespacesLeftByAKilledInstanceAreRemovedByTheNext) {
  // A pid that no process has now: a child that ended and was reaped.
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
  const std::string stale = "atoll-" + std::to_string(dead) + "-left";
  const testing::CommandResult added =
      testing::RunCommand({std::filesystem::exists("/usr/sbin/ip") ? "/usr/sbin/ip" : "/sbin/ip",
                           "netns", "add", stale});
  ASSERT_EQ(added.exit_code, 0) << added.Describe();
  ASSERT_TRUE(NetnsExists(stale));

  auto network = Make({"next"});
  ASSERT_NE(network, nullptr);
  EXPECT_FALSE(NetnsExists(stale));
}

TEST(VirtualNetworkNamesTest, MachineNamesArePlainAndUnique) {
  for (const std::vector<std::string>& names :
       {std::vector<std::string>{}, {"a b"}, {"switch"}, {"x", "x"}, {"../up"}}) {
    auto network = VirtualNetwork::Create(names);
    EXPECT_EQ(network.status().code(), Code::kInvalidArgument)
        << ::testing::PrintToString(names) << ": " << network.status().ToString();
  }
}

}  // namespace
}  // namespace atl
