// Sparse, data-dependent exchange end to end: a top-2 routing step. A gate on four devices
// of two hosts scales each token and routes it to its first- and second-choice expert shard
// (choices made by the data); three expert shards each get only the rows sent to them, often
// none. Every trial must complete, bounded by a timeout, with exactly the dense reference.
#include <random>

#include "tests/e2e/cluster_fixture.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kTokens = 8;
constexpr int64_t kWidth = 3;
constexpr int kExperts = 3;

Result<Program> TopTwoRouting(Client& client) {
  ATOLL_ASSIGN_OR_RETURN(Slice gate_slice, client.CreateSlice(4, "island0"));
  ATOLL_ASSIGN_OR_RETURN(Slice expert_slice, client.CreateSlice(kExperts, "island0"));
  FunctionBuilder gate("gate");
  gate.Output(gate.Mul(gate.Input(DType::kF32, {kTokens, kWidth}), 2.0));
  gate.Output(gate.Input(DType::kI32, {kTokens}));
  gate.Output(gate.Input(DType::kI32, {kTokens}));
  FunctionBuilder expert("expert");
  expert.Output(expert.Add(expert.Input(DType::kF32, {kDynamicDim, kWidth}), 1.0));
  expert.Output(expert.Mul(expert.Input(DType::kF32, {kDynamicDim, kWidth}), 3.0));
  ATOLL_ASSIGN_OR_RETURN(Function gate_fn, client.Register(gate, gate_slice));
  ATOLL_ASSIGN_OR_RETURN(Function expert_fn, client.Register(expert, expert_slice));
  ProgramBuilder p;
  auto routed = p.Call(gate_fn, {p.Arg(DType::kF32, {kTokens, kWidth}),
                                 p.Arg(DType::kI32, {kTokens}), p.Arg(DType::kI32, {kTokens})});
  auto experts = p.Call(expert_fn, {p.Route(routed[0], routed[1]), p.Route(routed[0], routed[2])});
  p.Return(experts);
  return p.Build();
}

// Expert by expert, the tokens whose `choice` is that expert, in token order, through `f`.
Tensor Dense(const std::vector<float>& tokens, const std::vector<int32_t>& choice,
             const std::function<float(float)>& f) {
  std::vector<float> out;
  for (int e = 0; e < kExperts; ++e) {
    for (int64_t t = 0; t < kTokens; ++t) {
      if (choice[t] != e) continue;
      for (int64_t w = 0; w < kWidth; ++w) out.push_back(f(tokens[t * kWidth + w]));
    }
  }
  return Tensor::F32({static_cast<int64_t>(out.size()) / kWidth, kWidth}, out);
}

TEST_F(ClusterTest, TopTwoRoutingReachesExactlyTheChosenExperts) {
  auto client = Connect("routing");
  ASSERT_NE(client, nullptr);
  auto program = TopTwoRouting(*client);
  ASSERT_THAT(program, IsOk());
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> value(-1, 1);
  int empty_experts = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> tokens(kTokens * kWidth);
    for (auto& x : tokens) x = value(rng);
    // Skewed choices, so that experts often get nothing; the second differs from the first.
    const int favourite = trial % kExperts;
    std::vector<int32_t> first(kTokens), second(kTokens);
    for (int64_t t = 0; t < kTokens; ++t) {
      first[t] = rng() % 4 ? favourite : static_cast<int32_t>(rng() % kExperts);
      second[t] = (first[t] + 1 + static_cast<int32_t>(rng() % (kExperts - 1))) % kExperts;
    }
    for (int e = 0; e < kExperts; ++e) {
      empty_experts += std::count(first.begin(), first.end(), e) == 0;
    }
    auto run =
        client->Submit(*program, {Tensor::F32({kTokens, kWidth}, tokens),
                                  Tensor::I32({kTokens}, first), Tensor::I32({kTokens}, second)});
    ASSERT_THAT(run, IsOk());
    auto out = run->Wait(10s);
    ASSERT_THAT(out, IsOk()) << "trial " << trial << ": " << out.status().ToString();
    EXPECT_EQ(out->at(0), Dense(tokens, first, [](float x) { return x * 2 + 1; }))
        << "trial " << trial;
    EXPECT_EQ(out->at(1), Dense(tokens, second, [](float x) { return x * 2 * 3; }))
        << "trial " << trial;
  }
  EXPECT_GT(empty_experts, 50);  // the case that needs progress tracking came up often
}

TEST_F(ClusterTest, ARowRoutedToAMissingShardFailsTheRunClearly) {
  auto client = Connect("routing");
  ASSERT_NE(client, nullptr);
  auto program = TopTwoRouting(*client);
  ASSERT_THAT(program, IsOk());
  std::vector<int32_t> bad(kTokens, 0);
  bad[5] = kExperts;  // no such expert
  auto run =
      client->Submit(*program, {Tensor(DType::kF32, {kTokens, kWidth}), Tensor::I32({kTokens}, bad),
                                Tensor(DType::kI32, {kTokens})});
  ASSERT_THAT(run, IsOk());
  auto out = run->Wait(10s);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("routed to shard 3"), std::string::npos)
      << out.status().ToString();
}

}  // namespace
}  // namespace atl::testing
