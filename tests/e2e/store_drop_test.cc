// An object store that dies while a client's read of a result waits in it, while the RM
// does not know it yet (its cluster gives a silent service 30 s): the client sees the
// store's connection drop and fails the run at once, naming the store, instead of waiting
// out the read's timeout for an answer that the dead store took with it. Once the store is
// back, the client's programs run there again.
#include <signal.h>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/one_call_program.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

class StoreDropTest : public ClusterTest {
 public:
  static void SetUpTestSuite() { StartCluster(ATOLL_SOURCE_DIR "/tests/e2e/long_liveness.toml"); }
};

TEST_F(StoreDropTest, AReadFromAStoreThatDiedFailsWhenTheConnectionDrops) {
  auto client = Connect("store-dropped");
  ASSERT_NE(client, nullptr);
  // Every device of the island: the result has a shard in each host's store.
  auto slice = client->CreateSlice(4, "island0");
  ASSERT_TRUE(slice.ok()) << slice.status().ToString();
  auto program =
      OneCall(*client, *slice, "inc", [](FunctionBuilder& b, Value x) { return b.Add(x, 1.0); });
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  const Tensor x = Tensor::F32({2}, {1, 2});
  auto first = client->Submit(*program, {x});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(first->Wait(20s).ok());

  // Stopped, the store takes the run's reads into its socket's buffers and answers
  // nothing; killed, it takes them with it.
  ASSERT_TRUE(cluster_->Signal("objectstore-i0h0", SIGSTOP).ok());
  auto doomed = client->Submit(*program, {x});
  ASSERT_TRUE(doomed.ok()) << doomed.status().ToString();
  ASSERT_TRUE(cluster_->Signal("objectstore-i0h0", SIGKILL).ok());
  auto out = doomed->Wait(20s);
  ASSERT_FALSE(out.ok()) << "the run completed";
  EXPECT_EQ(out.status().code(), Code::kUnavailable) << out.status().ToString();
  EXPECT_NE(out.status().message().find("object store"), std::string::npos)
      << out.status().ToString();
  EXPECT_NE(out.status().message().find("connection dropped"), std::string::npos)
      << out.status().ToString();

  // Back at the same address, it serves the client again.
  ASSERT_TRUE(cluster_->Restart("objectstore-i0h0", SIGKILL).ok());
  auto again = client->Submit(*program, {x});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto again_out = again->Wait(20s);
  ASSERT_TRUE(again_out.ok()) << again_out.status().ToString();
  EXPECT_EQ(again_out->at(0), Tensor::F32({2}, {2, 3}));
}

}  // namespace
}  // namespace atl::testing
