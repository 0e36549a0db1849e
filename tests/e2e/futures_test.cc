// Op-by-op calls chained through futures: each call's result feeds the next call before it
// exists, with no round trip per call; refusals and misplaced futures come back as errors.
#include <optional>

#include "tests/e2e/cluster_fixture.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

class FuturesTest : public ClusterTest {
 protected:
  // inc(x) = all_reduce_sum(x) + 1 over `slice`.
  static Result<Function> Inc(Client& client, const Slice& slice) {
    FunctionBuilder b("inc");
    b.Output(b.Add(b.AllReduceSum(b.Input(DType::kF32, {2}, Sharding::Replicated())), 1.0));
    return client.Register(b, slice);
  }
  // inc as a one-call program.
  static Result<Program> IncProgram(Client& client, const Slice& slice) {
    ATOLL_ASSIGN_OR_RETURN(Function fn, Inc(client, slice));
    ProgramBuilder p;
    p.Return({p.Call(fn, {p.Arg(DType::kF32, {2})})[0]});
    return p.Build();
  }
  // Connects client_ (named `name`) and gives it slice_, two devices on island0.
  void ConnectWithSlice(const std::string& name) {
    client_ = Connect(name);
    ASSERT_NE(client_, nullptr);
    auto slice = client_->CreateSlice(2, "island0");
    ASSERT_THAT(slice, IsOk());
    slice_ = *slice;
  }

  std::unique_ptr<Client> client_;
  Slice slice_;
};

TEST_F(FuturesTest, OpByOpCallsChainThroughFutures) {
  ASSERT_NO_FATAL_FAILURE(ConnectWithSlice("futures"));
  auto inc = IncProgram(*client_, slice_);
  ASSERT_THAT(inc, IsOk());
  std::vector<float> expect = {1, -1};
  auto run = client_->Submit(*inc, {Tensor::F32({2}, expect)});
  ASSERT_THAT(run, IsOk());
  for (auto& e : expect) e = 2 * e + 1;
  // The earlier runs go out of scope as the chain grows: their results must stay alive
  // for as long as a later run reads them.
  for (int i = 1; i < 30; ++i) {
    auto next = client_->Submit(*inc, {run->Output(0)});
    ASSERT_THAT(next, IsOk()) << "call " << i << ": " << next.status().ToString();
    run = std::move(next);
    for (auto& e : expect) e = 2 * e + 1;
  }
  auto out = run->Wait(30s);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->at(0), Tensor::F32({2}, expect));
}

TEST_F(FuturesTest, AnArgumentReturnedAsAResultIsTheClientsOwnCopy) {
  ASSERT_NO_FATAL_FAILURE(ConnectWithSlice("futures-returned-argument"));
  auto inc = Inc(*client_, slice_);
  ASSERT_THAT(inc, IsOk());
  ProgramBuilder p;
  Traced kept = p.Arg(DType::kF32, {2});
  Traced x = p.Arg(DType::kF32, {2});
  p.Return({p.Call(*inc, {x})[0], kept});
  auto program = p.Build();
  ASSERT_THAT(program, IsOk());
  std::optional<atl::Run> run;
  {
    Tensor value = Tensor::F32({2}, {7, 8});
    auto submitted = client_->Submit(*program, {value, Tensor::F32({2}, {1, 2})});
    ASSERT_THAT(submitted, IsOk());
    run = std::move(*submitted);
    value.as<float>()[0] = -1;  // the caller's tensor changes, then goes
  }
  auto out = run->Wait(30s);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->at(0), Tensor::F32({2}, {3, 5}));
  EXPECT_EQ(out->at(1), Tensor::F32({2}, {7, 8}));
}

TEST_F(FuturesTest, WaitingForOneResultLeavesItReadableByTheNextRun) {
  ASSERT_NO_FATAL_FAILURE(ConnectWithSlice("futures-one-result"));
  auto inc = IncProgram(*client_, slice_);
  ASSERT_THAT(inc, IsOk());
  auto run = client_->Submit(*inc, {Tensor::F32({2}, {1, 2})});
  ASSERT_THAT(run, IsOk());
  auto first = run->Wait(0, 30s);
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(*first, Tensor::F32({2}, {3, 5}));
  auto missing = run->Wait(1, 30s);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kInvalidArgument) << missing.status().ToString();
  auto next = client_->Submit(*inc, {run->Output(0)});
  ASSERT_THAT(next, IsOk());
  auto second = next->Wait(0, 30s);
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(*second, Tensor::F32({2}, {7, 11}));
}

TEST_F(FuturesTest, AFutureHeldOnOtherHostsIsRefusedAtSubmit) {
  auto client = Connect("futures-misplaced");
  ASSERT_NE(client, nullptr);
  auto here = client->CreateSlice(2, "island0");
  auto there = client->CreateSlice(2, "island1");
  ASSERT_TRUE(here.ok() && there.ok());
  auto inc_here = IncProgram(*client, *here);
  auto inc_there = IncProgram(*client, *there);
  ASSERT_TRUE(inc_here.ok() && inc_there.ok());
  auto run = client->Submit(*inc_here, {Tensor::F32({2}, {1, 2})});
  ASSERT_THAT(run, IsOk());
  auto moved = client->Submit(*inc_there, {run->Output(0)});
  ASSERT_FALSE(moved.ok());
  EXPECT_EQ(moved.status().code(), Code::kInvalidArgument) << moved.status().ToString();
  EXPECT_THAT(run->Wait(30s), IsOk());
}

TEST_F(FuturesTest, ARefusedSubmissionComesBackFromWait) {
  // A weight of 0 is refused by the scheduler; Submit does not wait for its answer.
  auto zero = Client::Connect({.rm_endpoint = RmEndpoint(), .name = "weightless", .weight = 0});
  ASSERT_THAT(zero, IsOk());
  auto slice0 = (*zero)->CreateSlice(1);
  ASSERT_THAT(slice0, IsOk());
  auto inc0 = IncProgram(**zero, *slice0);
  ASSERT_THAT(inc0, IsOk());
  auto run = (*zero)->Submit(*inc0, {Tensor::F32({2}, {1, 2})});
  ASSERT_THAT(run, IsOk());
  auto out = run->Wait(30s);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Code::kInvalidArgument) << out.status().ToString();
  EXPECT_NE(out.status().message().find("weight"), std::string::npos) << out.status().ToString();
}

}  // namespace
}  // namespace atl::testing
