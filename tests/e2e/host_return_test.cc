// A host silent for a while and then back, as a host cut off from the network is (its
// processes stopped with SIGSTOP, then continued): the RM loses it and takes it back, and its
// devices run programs again. Its store is lost while its executor still counts alive (so the
// executor is told, and detaches from it) and comes back while the executor still counts
// lost: the RM's notice that the store is back must reach the executor all the same, or its
// every later read of an argument fails. (tests/e2e/netns_test.cc cuts a real link.)
#include <signal.h>

#include <set>
#include <string>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/doubling_program.h"
#include "tests/e2e/event_recorder.h"
#include "tests/e2e/rm_topology.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

constexpr char kHost[] = "i0h1";

// Its own cluster (tests/e2e/liveness.toml, heartbeats of 200 ms x 3): the test stops a host.
class HostReturnTest : public ClusterTest {
 public:
  static void SetUpTestSuite() { StartCluster(ATOLL_SOURCE_DIR "/tests/e2e/liveness.toml"); }

 protected:
  // Whether the RM's event `topic` about kHost came (bounded).
  static bool Await(EventRecorder& events, const std::string& topic) {
    return events
        .WaitFor(
            topic, [](const Event& e) { return e.fields["host"] == kHost; }, 20s)
        .has_value();
  }
};

TEST_F(HostReturnTest, AHostSilentAWhileComesBackAndRunsProgramsWhenItsStoreReturnsFirst) {
  auto client = Connect("returner");
  ASSERT_NE(client, nullptr);
  EventRecorder events(EventsEndpoint());
  const std::string store = std::string("objectstore-") + kHost;
  const std::string executor = std::string("executor-") + kHost;

  ASSERT_THAT(cluster_->Signal(store, SIGSTOP), IsOk());
  ASSERT_TRUE(Await(events, "host.store_lost")) << "no host.store_lost for " << kHost;
  ASSERT_THAT(cluster_->Signal(executor, SIGSTOP), IsOk());
  ASSERT_TRUE(Await(events, "host.lost")) << "no host.lost for " << kHost;
  ASSERT_THAT(cluster_->Signal(store, SIGCONT), IsOk());
  ASSERT_TRUE(Await(events, "host.store_back")) << "no host.store_back for " << kHost;
  ASSERT_THAT(cluster_->Signal(executor, SIGCONT), IsOk());
  ASSERT_TRUE(Await(events, "host.back")) << "no host.back for " << kHost;

  // A slice of every device of island0 takes the host's two, and runs.
  auto slice = client->CreateSlice(4, "island0");
  ASSERT_THAT(slice, IsOk());
  ASSERT_EQ(HostsOf(AskRm(RmEndpoint()), slice->id()), (std::set<std::string>{"i0h0", kHost}));
  auto program = Doubling(*client, *slice, 4);
  ASSERT_THAT(program, IsOk());
  auto run = client->Submit(*program, {Filled(4, 1.5)});
  ASSERT_THAT(run, IsOk());
  auto out = run->Wait(30s);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->at(0), Filled(4, 3));
}

}  // namespace
}  // namespace atl::testing
