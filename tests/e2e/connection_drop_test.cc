// A scheduler or an object store that dies holding a client's request (a submission not
// yet answered, a read waiting for a result), while the RM does not know it yet (its
// cluster gives a silent service 30 s): the client sees the service's connection drop and
// fails the run at once, naming the service, instead of waiting out a timeout for an
// answer that the dead service took with it. Once the service is back, the client's
// programs run there again.
#include <signal.h>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/one_call_program.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

class ConnectionDropTest : public ClusterTest {
 public:
  static void SetUpTestSuite() { StartCluster(ATOLL_SOURCE_DIR "/tests/e2e/long_liveness.toml"); }

  // On a slice of `devices` of island0: a first run, then `service` stopped (its socket
  // takes what is sent to it into its buffers and answers nothing), a run submitted, the
  // service killed (taking that run's requests with it). The run must fail, naming the
  // service as `named`; restarted at the same address, the service serves the next run.
  void DropMidRun(const std::string& service, int devices, const std::string& named) {
    auto client = Connect("dropped-" + service);
    ASSERT_NE(client, nullptr);
    auto slice = client->CreateSlice(devices, "island0");
    ASSERT_THAT(slice, IsOk());
    auto program =
        OneCall(*client, *slice, "inc", [](FunctionBuilder& b, Value x) { return b.Add(x, 1.0); });
    ASSERT_THAT(program, IsOk());
    const Tensor x = Tensor::F32({2}, {1, 2});
    auto first = client->Submit(*program, {x});
    ASSERT_THAT(first, IsOk());
    ASSERT_THAT(first->Wait(20s), IsOk());

    ASSERT_THAT(cluster_->Signal(service, SIGSTOP), IsOk());
    auto doomed = client->Submit(*program, {x});
    ASSERT_THAT(doomed, IsOk());
    ASSERT_THAT(cluster_->Signal(service, SIGKILL), IsOk());
    auto out = doomed->Wait(20s);
    ASSERT_FALSE(out.ok()) << "the run completed";
    EXPECT_EQ(out.status().code(), Code::kUnavailable) << out.status().ToString();
    EXPECT_NE(out.status().message().find(named), std::string::npos) << out.status().ToString();
    EXPECT_NE(out.status().message().find("connection dropped"), std::string::npos)
        << out.status().ToString();

    ASSERT_THAT(cluster_->Restart(service, SIGKILL), IsOk());
    auto again = client->Submit(*program, {x});
    ASSERT_THAT(again, IsOk());
    auto again_out = again->Wait(20s);
    ASSERT_THAT(again_out, IsOk());
    EXPECT_EQ(again_out->at(0), Tensor::F32({2}, {2, 3}));
  }
};

TEST_F(ConnectionDropTest, ARunItsSchedulerDiedWithFailsWhenTheConnectionDrops) {
  DropMidRun("scheduler-island0", 1, "the scheduler of island island0");
}

// Every device of the island: the result has a shard in each host's store, one of which
// dies while the run's read of it waits there.
TEST_F(ConnectionDropTest, AReadFromAStoreThatDiedFailsWhenTheConnectionDrops) {
  DropMidRun("objectstore-i0h0", 4, "the object store of host i0h0");
}

}  // namespace
}  // namespace atl::testing
