// A scheduler that dies before it answered a submission, while the RM does not know it yet
// (its cluster gives a silent service 30 s): the client sees the scheduler's connection drop
// and fails the run at once, naming the scheduler, instead of waiting out the run's timeout
// for an answer that the dead scheduler took with it. Once the scheduler is back, the
// client's programs run there again.
#include <signal.h>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/one_call_program.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

class SchedulerDropTest : public ClusterTest {
 public:
  static void SetUpTestSuite() { StartCluster(ATOLL_SOURCE_DIR "/tests/e2e/long_liveness.toml"); }
};

TEST_F(SchedulerDropTest, ARunItsSchedulerDiedWithFailsWhenTheConnectionDrops) {
  auto client = Connect("dropped");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateSlice(1, "island0");
  ASSERT_TRUE(slice.ok()) << slice.status().ToString();
  auto program =
      OneCall(*client, *slice, "inc", [](FunctionBuilder& b, Value x) { return b.Add(x, 1.0); });
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  const Tensor x = Tensor::F32({2}, {1, 2});
  // A first run: the client's connection to the scheduler is up.
  auto first = client->Submit(*program, {x});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(first->Wait(20s).ok());

  // Stopped, the scheduler takes the submission into its socket's buffers and answers
  // nothing; killed, it takes the submission with it.
  ASSERT_TRUE(cluster_->Signal("scheduler-island0", SIGSTOP).ok());
  auto doomed = client->Submit(*program, {x});
  ASSERT_TRUE(doomed.ok()) << doomed.status().ToString();
  ASSERT_TRUE(cluster_->Signal("scheduler-island0", SIGKILL).ok());
  auto out = doomed->Wait(20s);
  ASSERT_FALSE(out.ok()) << "the run completed";
  EXPECT_EQ(out.status().code(), Code::kUnavailable) << out.status().ToString();
  EXPECT_NE(out.status().message().find("the scheduler of island island0"), std::string::npos)
      << out.status().ToString();
  EXPECT_NE(out.status().message().find("connection dropped"), std::string::npos)
      << out.status().ToString();

  // Back at the same address, it serves the client again.
  ASSERT_TRUE(cluster_->Restart("scheduler-island0", SIGKILL).ok());
  auto again = client->Submit(*program, {x});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto again_out = again->Wait(20s);
  ASSERT_TRUE(again_out.ok()) << again_out.status().ToString();
  EXPECT_EQ(again_out->at(0), Tensor::F32({2}, {2, 3}));
}

}  // namespace
}  // namespace atl::testing
