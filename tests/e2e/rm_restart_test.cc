// RM restart: the RM is killed (SIGKILL, as in a crash) and started again on the same
// endpoints while a client holds a slice. Its state file brings back the client, the slice
// and its devices, and the registered functions: the client's next program runs, and a new
// function registered on the old slice compiles on executors that reconnected by themselves.
#include <signal.h>

#include "common/net/transport.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/member_context.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

class RmRestartTest : public ClusterTest {
 public:
  static void SetUpTestSuite() { StartCluster(ATOLL_SOURCE_DIR "/tests/e2e/three_hosts.toml"); }
};

Result<proto::ClusterStatus> AskStatus(const std::string& rm) {
  MemberContext context;
  net::Requester peer(context, rm);
  ATOLL_RETURN_IF_ERROR(peer.Connect());
  return peer.Call<proto::ClusterStatus>(proto::GetClusterStatus{}, 5s);
}

TEST_F(RmRestartTest, ClientsSlicesAndFunctionsSurviveAnRmRestart) {
  auto client = Connect("survivor");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateSlice(2);
  ASSERT_TRUE(slice.ok()) << slice.status().ToString();
  FunctionBuilder fb("inc");
  fb.Output(fb.Add(fb.Input(DType::kF32, {4}), 1.0));
  auto inc = client->Register(fb, *slice);
  ASSERT_TRUE(inc.ok()) << inc.status().ToString();
  ProgramBuilder pb;
  pb.Return({pb.Call(*inc, {pb.Arg(DType::kF32, {4})})[0]});
  const Program program = pb.Build().value();
  const Tensor x = Tensor::F32({4}, {1, 2, 3, 4});
  auto first = client->Submit(program, {x});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(first->Wait(20s).ok());
  auto before = AskStatus(RmEndpoint());
  ASSERT_TRUE(before.ok()) << before.status().ToString();

  ASSERT_TRUE(cluster_->Restart("rm", SIGKILL).ok());

  // The restarted RM knows what the old one knew.
  auto after = AskStatus(RmEndpoint());
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->slices, before->slices);
  EXPECT_EQ(after->clients, 1u);
  EXPECT_EQ(after->functions, before->functions);

  // The client's next program runs.
  auto next = client->Submit(program, {x});
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  auto out = next->Wait(20s);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->at(0), Tensor::F32({4}, {2, 3, 4, 5}));

  // The RM still knows the client and its slice: a new function registers on it, compiled
  // by executors once they reconnected, and runs after the old one.
  FunctionBuilder gb("double");
  gb.Output(gb.Mul(gb.Input(DType::kF32, {4}), 2.0));
  auto twice = client->Register(gb, *slice);
  ASSERT_TRUE(twice.ok()) << twice.status().ToString();
  ProgramBuilder chain;
  chain.Return({chain.Call(*twice, {chain.Call(*inc, {chain.Arg(DType::kF32, {4})})[0]})[0]});
  auto chained = client->Submit(chain.Build().value(), {x});
  ASSERT_TRUE(chained.ok()) << chained.status().ToString();
  auto chained_out = chained->Wait(20s);
  ASSERT_TRUE(chained_out.ok()) << chained_out.status().ToString();
  EXPECT_EQ(chained_out->at(0), Tensor::F32({4}, {4, 6, 8, 10}));

  // And hands out new slices without reusing the old one's id.
  auto another = client->CreateSlice(1);
  ASSERT_TRUE(another.ok()) << another.status().ToString();
  EXPECT_GT(another->id(), slice->id());
}

}  // namespace
}  // namespace atl::testing
