// Irregular nodes end to end: a function whose output length depends on the data, split
// over four devices of two hosts, each shard keeping a different number of elements; the
// client joins the ragged shards in order, and a consumer of the dynamic shape runs on them.
#include <random>

#include "tests/e2e/cluster_fixture.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

Result<Program> KeepPositiveThenTriple(Client& client, int64_t n) {
  ATOLL_ASSIGN_OR_RETURN(Slice slice, client.CreateSlice(4));
  FunctionBuilder keep("keep_positive");
  keep.Output(keep.Filter(keep.Input(DType::kF32, {n}), 0.0));
  FunctionBuilder triple("triple");
  triple.Output(triple.Mul(triple.Input(DType::kF32, {kDynamicDim}), 3.0));
  ATOLL_ASSIGN_OR_RETURN(Function keep_fn, client.Register(keep, slice));
  ATOLL_ASSIGN_OR_RETURN(Function triple_fn, client.Register(triple, slice));
  ProgramBuilder p;
  Traced kept = p.Call(keep_fn, {p.Arg(DType::kF32, {n})})[0];
  p.Return({kept, p.Call(triple_fn, {kept})[0]});
  return p.Build();
}

TEST_F(ClusterTest, RaggedShardsOfAFilterAreJoinedInOrder) {
  constexpr int64_t kN = 16;
  auto client = Connect("irregular");
  ASSERT_NE(client, nullptr);
  auto program = KeepPositiveThenTriple(*client, kN);
  ASSERT_THAT(program, IsOk());

  std::mt19937 rng(7);
  std::uniform_int_distribution<int> value(-9, 9);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> v(kN);
    for (auto& x : v) x = static_cast<float>(value(rng));
    if (trial == 0) std::fill(v.begin(), v.begin() + kN / 4, -1.0f);  // shard 0 keeps nothing
    std::vector<float> kept;
    std::vector<float> tripled;
    for (float x : v) {
      if (x > 0) {
        kept.push_back(x);
        tripled.push_back(3 * x);
      }
    }
    const auto size = static_cast<int64_t>(kept.size());
    auto run = client->Submit(*program, {Tensor::F32({kN}, v)});
    ASSERT_THAT(run, IsOk());
    auto out = run->Wait(20s);
    ASSERT_THAT(out, IsOk()) << "trial " << trial << ": " << out.status().ToString();
    EXPECT_EQ(out->at(0), Tensor::F32({size}, kept)) << "trial " << trial;
    EXPECT_EQ(out->at(1), Tensor::F32({size}, tripled)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace atl::testing
