// Grad (include/atoll/grad.h) on a real cluster: of a data-parallel function on a 4-device
// slice over two hosts, whose partial weight gradients Grad all-reduces over the data plane,
// the gradients equal those of the same function on one device; and of a function of every
// differentiable collective on a 2x2 mesh, the gradient equals central finite differences in
// f64.
#include <cmath>
#include <random>

#include "atoll/grad.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/relative_difference.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kBatch = 16, kIn = 6, kHidden = 8, kClasses = 3;

// A layer-normed MLP's mean cross-entropy over rows split across the slice: (x, labels, w1,
// b1, gamma, beta, w2) -> loss.
FunctionBuilder Loss() {
  FunctionBuilder b("loss");
  const Value x = b.Input(DType::kF32, {kBatch, kIn});
  const Value labels = b.Input(DType::kI32, {kBatch});
  const Value w1 = b.Input(DType::kF32, {kIn, kHidden}, Sharding::Replicated());
  const Value b1 = b.Input(DType::kF32, {kHidden}, Sharding::Replicated());
  const Value gamma = b.Input(DType::kF32, {kHidden}, Sharding::Replicated());
  const Value beta = b.Input(DType::kF32, {kHidden}, Sharding::Replicated());
  const Value w2 = b.Input(DType::kF32, {kHidden, kClasses}, Sharding::Replicated());
  const Value h = b.LayerNorm(b.Tanh(b.BiasAdd(b.Matmul(x, w1), b1)), gamma, beta);
  b.Output(b.AllReduceSum(b.CrossEntropy(b.Matmul(h, w2), labels).loss));
  return b;
}

class GradTest : public ClusterTest {};

TEST_F(GradTest, DataParallelGradientsEqualTheOneDeviceGradients) {
  auto client = Connect("grad");
  ASSERT_NE(client, nullptr);
  // Every input but the labels: x's gradient stays split, the weights' are all-reduced.
  auto grad = ValueAndGrad(Loss(), {0, 2, 3, 4, 5, 6});
  ASSERT_THAT(grad, IsOk());

  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<Tensor> args;
  for (const Shape& shape : {Shape{kBatch, kIn}, Shape{kBatch}, Shape{kIn, kHidden}, Shape{kHidden},
                             Shape{kHidden}, Shape{kHidden}, Shape{kHidden, kClasses}}) {
    Tensor t(shape.size() == 1 && shape[0] == kBatch ? DType::kI32 : DType::kF32, shape);
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      if (t.dtype() == DType::kI32) {
        t.as<int32_t>()[i] = static_cast<int32_t>(rng() % kClasses);
      } else {
        t.as<float>()[i] = u(rng);
      }
    }
    args.push_back(std::move(t));
  }

  std::vector<std::vector<Tensor>> results;
  for (uint32_t devices : {1u, 4u}) {
    auto slice = client->CreateSlice(devices, "island0");
    ASSERT_THAT(slice, IsOk());
    auto fn = client->Register(*grad, *slice);
    ASSERT_THAT(fn, IsOk());
    ProgramBuilder p;
    std::vector<Traced> traced;
    for (const Tensor& t : args) traced.push_back(p.Arg(t.dtype(), t.shape()));
    p.Return(p.Call(*fn, traced));
    auto program = p.Build();
    ASSERT_THAT(program, IsOk());
    std::vector<Input> inputs(args.begin(), args.end());
    auto run = client->Submit(*program, inputs);
    ASSERT_THAT(run, IsOk());
    auto out = run->Wait(30s);
    ASSERT_THAT(out, IsOk()) << devices << " devices: " << out.status().ToString();
    ASSERT_EQ(out->size(), 7u);
    results.push_back(std::move(out).value());
  }
  // The same sums in another order (per device, then all-reduced): rounding differs.
  for (size_t o = 0; o < results[0].size(); ++o) {
    EXPECT_LE(RelativeDifference(results[1][o], results[0][o]), 1e-5) << "output " << o;
  }
  // And the gradients are not trivially equal: training would move the weights.
  EXPECT_GT(RelativeDifference(results[0][2], Tensor(DType::kF32, {kIn, kHidden})), 1e-3);
}

// On a 2x2 (a, b) mesh: x cut along both axes goes through all_gather (b), all_to_all and
// collective_permute (a), a row sum (partial along a), all_reduce_mean and reduce_scatter
// (a), broadcast (b) and all_reduce_sum; loss(x) is f64 [], the same on every device.
FunctionBuilder CollectivesLoss() {
  FunctionBuilder f("collectives");
  const Value x = f.Input(DType::kF64, {4, 4}, Sharding::Axes({0, 1}));
  const Value rows = f.AllToAll(f.AllGather(x, 1), 0, 1);  // cut on dim 1 along a
  const Value swapped = f.CollectivePermute(rows, 0, {{0, 1}, {1, 0}});
  const Value partial = f.ReduceSum(f.Tanh(swapped), 1);   // [4], partial along a
  const Value mean = f.Tanh(f.AllReduceMean(partial, 0));  // [4] whole
  const Value root = f.Broadcast(f.Mul(mean, mean), 1, 1);
  const Value cut = f.ReduceScatter(partial, 0, 0);  // [4] cut along a
  const Value cut_sum = f.AllReduceSum(f.ReduceSum(f.Mul(cut, cut), 0), 0);
  f.Output(f.Add(f.ReduceSum(root, 0), cut_sum));
  return f;
}

TEST_F(GradTest, CollectivesOnAMeshEqualCentralFiniteDifferencesInF64) {
  auto client = Connect("grad-collectives");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateMeshSlice({2, 2}, "island0");
  ASSERT_THAT(slice, IsOk());
  const FunctionBuilder loss = CollectivesLoss();
  auto grad = Grad(loss, {0});
  ASSERT_THAT(grad, IsOk());

  // Runs `b` (one f64 [4,4] input) on the mesh for each of `xs`, all submitted at once.
  auto run_all = [&](const FunctionBuilder& b, const std::vector<Tensor>& xs) {
    std::vector<Tensor> outs;
    auto fn = client->Register(b, *slice);
    EXPECT_THAT(fn, IsOk());
    if (!fn.ok()) return outs;
    ProgramBuilder p;
    p.Return(p.Call(*fn, {p.Arg(DType::kF64, {4, 4})}));
    auto program = p.Build();
    EXPECT_THAT(program, IsOk());
    if (!program.ok()) return outs;
    std::vector<atl::Run> runs;
    for (const Tensor& x : xs) {
      auto run = client->Submit(*program, {x});
      EXPECT_THAT(run, IsOk());
      if (!run.ok()) return outs;
      runs.push_back(std::move(run).value());
    }
    for (atl::Run& run : runs) {
      auto out = run.Wait(60s);
      EXPECT_THAT(out, IsOk());
      if (!out.ok()) return std::vector<Tensor>{};
      outs.push_back(std::move((*out)[0]));
    }
    return outs;
  };

  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor x(DType::kF64, {4, 4});
  for (double& v : x.as<double>()) v = u(rng);
  const std::vector<Tensor> analytic = run_all(*grad, {x});
  ASSERT_EQ(analytic.size(), 1u);

  constexpr double kStep = 1e-6, kTolerance = 1e-7;  // as tests/client/grad_rules_test.cc
  std::vector<Tensor> shifted;
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    for (double sign : {1.0, -1.0}) {
      Tensor t = x;
      t.as<double>()[i] += sign * kStep;
      shifted.push_back(std::move(t));
    }
  }
  const std::vector<Tensor> losses = run_all(loss, shifted);
  ASSERT_EQ(losses.size(), shifted.size());
  double largest = 0;
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const double numeric =
        (losses[2 * i].as<double>()[0] - losses[2 * i + 1].as<double>()[0]) / (2 * kStep);
    const double got = analytic[0].as<double>()[i];
    largest = std::max(largest, std::abs(got));
    EXPECT_LE(std::abs(numeric - got) / (1 + std::abs(got)), kTolerance)
        << "element " << i << ": numeric " << numeric << ", Grad " << got;
  }
  EXPECT_GT(largest, 1e-3);  // a gradient, not zeros
}

}  // namespace
}  // namespace atl::testing
