// The Pathways paper's Figure 2 program, run through the real rm, schedulers, executors
// and object stores: a(x)=x*2, b(x)=x+1, c(x)=x/2, each over its own 2-device slice;
// f(v) computes x=a(v), y=b(v), z=a(c(x)) and returns (y, z).
#include <random>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/figure2_program.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

TEST_F(ClusterTest, Figure2ReturnsThePapersResult) {
  auto client = Connect("figure2");
  ASSERT_NE(client, nullptr);
  auto program = TraceFigure2(*client, {2});
  ASSERT_THAT(program, IsOk());
  EXPECT_EQ(program->num_nodes(), 4u);

  auto run = client->Submit(*program, {Tensor::F32({2}, {1, 2})});
  ASSERT_THAT(run, IsOk());
  auto outputs = run->Wait(20s);
  ASSERT_THAT(outputs, IsOk());
  ASSERT_EQ(outputs->size(), 2u);
  EXPECT_EQ((*outputs)[0], Tensor::F32({2}, {2, 3}));
  EXPECT_EQ((*outputs)[1], Tensor::F32({2}, {2, 4}));
}

TEST_F(ClusterTest, Figure2ProgramRunsAgainWithOtherInputs) {
  auto client = Connect("figure2-repeat");
  ASSERT_NE(client, nullptr);
  auto program = TraceFigure2(*client, {8});
  ASSERT_THAT(program, IsOk());
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> dist(-100, 100);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> v(8);
    for (auto& e : v) e = static_cast<float>(dist(rng));
    auto run = client->Submit(*program, {Tensor::F32({8}, v)});
    ASSERT_THAT(run, IsOk());
    auto outputs = run->Wait(20s);
    ASSERT_THAT(outputs, IsOk()) << "trial " << trial << ": " << outputs.status().ToString();
    std::vector<float> y(8), z(8);
    for (int i = 0; i < 8; ++i) {
      y[i] = v[i] + 1;
      z[i] = (v[i] * 2 / 2) * 2;
    }
    EXPECT_EQ((*outputs)[0], Tensor::F32({8}, y)) << "trial " << trial;
    EXPECT_EQ((*outputs)[1], Tensor::F32({8}, z)) << "trial " << trial;
  }
}

TEST_F(ClusterTest, AFailingComputationReportsItsErrorInsteadOfHanging) {
  auto client = Connect("failing");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateSlice(2);
  ASSERT_THAT(slice, IsOk());
  FunctionBuilder divide("divide");
  Value x = divide.Input(DType::kI32, {2});
  divide.Output(divide.Div(x, divide.Input(DType::kI32, {2})));
  auto fn = client->Register(divide, *slice);
  ASSERT_THAT(fn, IsOk());
  FunctionBuilder twice("twice");
  twice.Output(twice.Mul(twice.Input(DType::kI32, {2}), 2.0));
  auto then = client->Register(twice, *slice);
  ASSERT_THAT(then, IsOk());

  ProgramBuilder p;
  Traced n = p.Arg(DType::kI32, {2});
  Traced d = p.Arg(DType::kI32, {2});
  p.Return({p.Call(*then, {p.Call(*fn, {n, d})[0]})[0]});
  auto program = p.Build();
  ASSERT_THAT(program, IsOk());

  // Shard 1 divides by zero; its error must reach the result through the second node.
  auto run = client->Submit(*program, {Tensor::I32({2}, {4, 6}), Tensor::I32({2}, {2, 0})});
  ASSERT_THAT(run, IsOk());
  auto outputs = run->Wait(20s);
  ASSERT_FALSE(outputs.ok());
  EXPECT_EQ(outputs.status().code(), Code::kInvalidArgument) << outputs.status().ToString();
  EXPECT_NE(outputs.status().message().find("zero"), std::string::npos)
      << outputs.status().ToString();
}

}  // namespace
}  // namespace atl::testing
