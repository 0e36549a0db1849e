// Grad (include/atoll/grad.h) of a data-parallel function on a real cluster: on a 4-device
// slice over two hosts, whose partial weight gradients Grad all-reduces over the data plane,
// the gradients equal those of the same function on one device.
#include <random>

#include "atoll/grad.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/relative_difference.h"

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
  ASSERT_TRUE(grad.ok()) << grad.status().ToString();

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
    ASSERT_TRUE(slice.ok()) << slice.status().ToString();
    auto fn = client->Register(*grad, *slice);
    ASSERT_TRUE(fn.ok()) << fn.status().ToString();
    ProgramBuilder p;
    std::vector<Traced> traced;
    for (const Tensor& t : args) traced.push_back(p.Arg(t.dtype(), t.shape()));
    p.Return(p.Call(*fn, traced));
    auto program = p.Build();
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    std::vector<Input> inputs(args.begin(), args.end());
    auto run = client->Submit(*program, inputs);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    auto out = run->Wait(30s);
    ASSERT_TRUE(out.ok()) << devices << " devices: " << out.status().ToString();
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

}  // namespace
}  // namespace atl::testing
