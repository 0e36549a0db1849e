// Every float kernel in f64 against its double-precision reference, to within what only f64
// arithmetic gets near (1e-12 relative: f32 would be off by 1e-7), and every backward against
// central finite differences of its f64 forward kernel: what gradient checks of f64 programs
// rely on. Integer kernels in i64 alike.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/arithmetic.h"
#include "kernels/collectives.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "kernels/nn.h"
#include "kernels/optim.h"
#include "kernels/reduce.h"
#include "kernels/shape_ops.h"
#include "kernels/topk.h"
#include "tests/kernels/kernel_checks.h"
#include "tests/kernels/reference_ops.h"
#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

using testutil::Dot;
using testutil::ExpectInvalid;
using testutil::NumericGrad;
using testutil::RandomF64;

constexpr double kTight = 1e-12;

void ExpectF64(const Tensor& got, const Shape& shape, const std::vector<double>& ref,
               double tol = kTight) {
  testutil::ExpectClose(got, shape, ref, tol, tol, DType::kF64);
}

TEST(F64KernelTest, EveryUnaryOpMatchesItsReference) {
  std::mt19937 rng(640);
  for (UnaryFn fn : kUnaryFns) {
    SCOPED_TRACE(UnaryFnName(fn));
    const testutil::UnaryDomain d = testutil::DomainOf(fn);
    const Tensor x = RandomF64(rng, {7, 13}, d.lo, d.hi);
    ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor y, Unary(fn, x));
    std::vector<double> ref;
    for (double v : x.ToDoubles()) ref.push_back(testutil::RefUnary(fn, v));
    ExpectF64(y, {7, 13}, ref);
  }
}

TEST(F64KernelTest, ArithmeticAndBroadcastMatchTheirReference) {
  std::mt19937 rng(641);
  const Tensor a = RandomF64(rng, {5, 9});
  const Tensor b = RandomF64(rng, {5, 9}, 0.5, 4);
  const Tensor bias = RandomF64(rng, {9});
  for (BinaryFn fn : {BinaryFn::kAdd, BinaryFn::kSub, BinaryFn::kMul, BinaryFn::kDiv}) {
    SCOPED_TRACE(BinaryFnName(fn));
    const auto av = a.ToDoubles(), bv = b.ToDoubles(), cv = bias.ToDoubles();
    std::vector<double> ref(av.size()), with_scalar(av.size()), broadcast(av.size());
    for (size_t i = 0; i < av.size(); ++i) {
      ref[i] = testutil::RefBinary(fn, av[i], bv[i]);
      with_scalar[i] = testutil::RefBinary(fn, av[i], 0.1);
      broadcast[i] = testutil::RefBinary(fn, av[i], cv[i % 9]);
    }
    ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor y, Binary(fn, a, b));
    ExpectF64(y, {5, 9}, ref, 0);  // one IEEE operation: exact
    ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor s, Binary(fn, a, 0.1));
    ExpectF64(s, {5, 9}, with_scalar, 0);  // 0.1 as a double, not rounded to f32
    ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor z, BroadcastBinary(fn, a, bias));
    ExpectF64(z, {5, 9}, broadcast, 0);
  }
  ExpectInvalid(BroadcastBinary(BinaryFn::kAdd, a, Tensor(DType::kF32, {9})), {"one dtype"});
}

TEST(F64KernelTest, I64ArithmeticWrapsAndRefusesAZeroDivisor) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  const int64_t min = std::numeric_limits<int64_t>::min();
  const Tensor a = Tensor::I64({3}, {max, min, -7});
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor sum, Binary(BinaryFn::kAdd, a, 1.0));
  EXPECT_EQ(sum.dtype(), DType::kI64);
  EXPECT_EQ(sum.as<int64_t>()[0], min);  // wraps around
  EXPECT_EQ(sum.as<int64_t>()[2], -6);
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor q,
                             Binary(BinaryFn::kDiv, a, Tensor::I64({3}, {2, -1, 2})));
  EXPECT_EQ(q.as<int64_t>()[1], min);  // MIN / -1 wraps to MIN
  EXPECT_EQ(q.as<int64_t>()[2], -3);   // toward zero
  // 2^40 is no i32 but is an i64 scalar; 2^63 is neither.
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor big,
                             Binary(BinaryFn::kMul, Tensor::I64({1}, {3}), 0x1p40));
  EXPECT_EQ(big.as<int64_t>()[0], int64_t{3} << 40);
  ExpectInvalid(Binary(BinaryFn::kAdd, a, 0x1p63), {"i64 range"});
  ExpectInvalid(Binary(BinaryFn::kDiv, a, Tensor::I64({3}, {1, 0, 1})), {"division by zero"});
  ExpectInvalid(Binary(BinaryFn::kAdd, Tensor(DType::kBF16, {2}), Tensor(DType::kBF16, {2})),
                {"bf16", "storage dtype"});
}

TEST(F64KernelTest, MatmulMatchesItsReferenceForEveryTranspose) {
  std::mt19937 rng(642);
  const int64_t m = 13, k = 33, n = 7;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(testing::Message() << "ta=" << ta << " tb=" << tb);
      const Shape a_shape = ta ? Shape{k, m} : Shape{m, k};
      const Shape b_shape = tb ? Shape{n, k} : Shape{k, n};
      const Tensor a = RandomF64(rng, a_shape), b = RandomF64(rng, b_shape);
      ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor c,
                                 Matmul(a, b, {.transpose_a = ta, .transpose_b = tb}));
      ExpectF64(c, {m, n},
                testutil::RefMatmul(a.ToDoubles(), a_shape[1], ta, b.ToDoubles(), b_shape[1], tb, m,
                                    k, n));
    }
  }
  ExpectInvalid(Matmul(Tensor(DType::kF64, {2, 2}), Tensor(DType::kF32, {2, 2}), {}),
                {"one dtype", "f64[2,2]", "f32[2,2]"});
}

TEST(F64KernelTest, ReductionsSoftmaxAndLayerNormMatchTheirReferences) {
  std::mt19937 rng(643);
  const Tensor x = RandomF64(rng, {6, 11});
  const auto xv = x.ToDoubles();
  std::vector<double> sum(11, 0.0), mean(11);
  for (size_t i = 0; i < xv.size(); ++i) sum[i % 11] += xv[i];
  for (size_t j = 0; j < 11; ++j) mean[j] = sum[j] / 6;
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor s, ReduceSum(x, 0));
  ExpectF64(s, {11}, sum);
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor mn, ReduceMean(x, 0));
  ExpectF64(mn, {11}, mean);
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor p, Softmax(x));
  ExpectF64(p, {6, 11}, testutil::RefSoftmax(xv, 11));
  const Tensor g = RandomF64(rng, {11}), b = RandomF64(rng, {11});
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor y, LayerNorm(x, g, b, 1e-5));
  ExpectF64(y, {6, 11}, testutil::RefLayerNorm(xv, g.ToDoubles(), b.ToDoubles(), 1e-5));
  ExpectInvalid(LayerNorm(x, Tensor(DType::kF32, {11}), b), {"gamma", "must be f64"});
}

// The f64 forward evaluated at a perturbed copy of one input, for finite differences.
double Forward(const std::function<Tensor(const Tensor&)>& f, const std::vector<double>& v,
               const Shape& shape, const std::vector<double>& weights) {
  return Dot(weights, f(Tensor::F64(shape, v)).ToDoubles());
}

// Gradients of f64 programs are checked against central differences of their f64 forward:
// with h = 1e-6 the differences are good to about 1e-9, far below f32's 1e-4.
constexpr double kStep = 1e-6;
constexpr double kFiniteDifferenceTol = 1e-8;

TEST(F64KernelTest, BackwardKernelsMatchFiniteDifferencesOfTheirForward) {
  std::mt19937 rng(644);
  const Shape shape = {5, 8};
  const Tensor x = RandomF64(rng, shape), gamma = RandomF64(rng, {8}), beta = RandomF64(rng, {8});
  const Tensor dy = RandomF64(rng, shape);
  const auto dyv = dy.ToDoubles();
  auto layer_norm = [&](const Tensor& v) { return LayerNorm(v, gamma, beta, 1e-5).value(); };
  ATOLL_ASSERT_OK_AND_ASSIGN(const LayerNormGrads grads, LayerNormBackward(dy, x, gamma, 1e-5));
  ExpectF64(grads.dx, shape,
            NumericGrad([&](const auto& v) { return Forward(layer_norm, v, shape, dyv); },
                        x.ToDoubles(), kStep),
            kFiniteDifferenceTol);
  auto layer_norm_of_gamma = [&](const Tensor& g) { return LayerNorm(x, g, beta, 1e-5).value(); };
  ExpectF64(grads.dgamma, {8},
            NumericGrad([&](const auto& v) { return Forward(layer_norm_of_gamma, v, {8}, dyv); },
                        gamma.ToDoubles(), kStep),
            kFiniteDifferenceTol);
  std::vector<double> dbeta(8, 0.0);
  for (size_t i = 0; i < dyv.size(); ++i) dbeta[i % 8] += dyv[i];
  ExpectF64(grads.dbeta, {8}, dbeta);

  auto gelu = [](const Tensor& v) { return Unary(UnaryFn::kGelu, v).value(); };
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor dgelu, GeluBackward(dy, x));
  ExpectF64(dgelu, shape,
            NumericGrad([&](const auto& v) { return Forward(gelu, v, shape, dyv); }, x.ToDoubles(),
                        kStep),
            kFiniteDifferenceTol);

  // Cross-entropy with i64 labels: its loss against the reference, its gradient against
  // differences of the f64 loss kernel.
  const Tensor labels = Tensor::I64({5}, {0, 7, 3, 3, 1});
  ATOLL_ASSERT_OK_AND_ASSIGN(const CrossEntropyResult ce, CrossEntropy(x, labels));
  ExpectF64(ce.loss, {}, {testutil::RefCrossEntropy(x.ToDoubles(), labels.ToDoubles(), 8)});
  auto loss = [&](const Tensor& v) { return CrossEntropy(v, labels).value().loss; };
  ExpectF64(ce.dlogits, shape,
            NumericGrad([&](const auto& v) { return Forward(loss, v, shape, {1.0}); },
                        x.ToDoubles(), kStep),
            kFiniteDifferenceTol);
}

// The kernels of Grad's gradient ops (unary_grad, softmax_grad, top_k_grad) in f64.
TEST(F64KernelTest, GradientOpKernelsMatchFiniteDifferencesOfTheirForward) {
  std::mt19937 rng(647);
  const Shape shape = {5, 8};
  const Tensor dy = RandomF64(rng, shape);
  const auto dyv = dy.ToDoubles();
  for (UnaryFn fn : kUnaryFns) {
    SCOPED_TRACE(UnaryFnName(fn));
    const testutil::UnaryDomain d = testutil::DomainOf(fn);
    const Tensor x = RandomF64(rng, shape, d.lo, d.hi);
    auto forward = [fn](const Tensor& v) { return Unary(fn, v).value(); };
    ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor dx, UnaryBackward(fn, dy, x));
    ExpectF64(dx, shape,
              NumericGrad([&](const auto& v) { return Forward(forward, v, shape, dyv); },
                          x.ToDoubles(), kStep),
              kFiniteDifferenceTol);
  }
  const Tensor x = RandomF64(rng, shape);
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor y, Softmax(x));
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor dsoftmax, SoftmaxBackward(dy, y));
  auto softmax = [](const Tensor& v) { return Softmax(v).value(); };
  ExpectF64(dsoftmax, shape,
            NumericGrad([&](const auto& v) { return Forward(softmax, v, shape, dyv); },
                        x.ToDoubles(), kStep),
            kFiniteDifferenceTol);

  // Top-k's values move with the chosen elements alone (the random values are distinct).
  const Tensor dtop = RandomF64(rng, {5, 3});
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor dtopk, TopKBackward(dtop, x));
  auto top_k = [](const Tensor& v) { return TopK(v, 3).value().values; };
  ExpectF64(dtopk, shape,
            NumericGrad([&](const auto& v) { return Forward(top_k, v, shape, dtop.ToDoubles()); },
                        x.ToDoubles(), kStep),
            kFiniteDifferenceTol);
  ExpectInvalid(UnaryBackward(UnaryFn::kExp, RandomF64(rng, {3}), Tensor(DType::kF32, {3})),
                {"exp backward dy", "f64[3]"});
}

TEST(F64KernelTest, OptimizersComputeInDouble) {
  std::mt19937 rng(645);
  const Tensor p = RandomF64(rng, {17}), g = RandomF64(rng, {17});
  const auto pv = p.ToDoubles(), gv = g.ToDoubles();
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor next, SgdUpdate(p, g, {.learning_rate = 0.1}));
  std::vector<double> ref(pv.size());
  for (size_t i = 0; i < pv.size(); ++i) ref[i] = pv[i] - 0.1 * gv[i];
  ExpectF64(next, {17}, ref, 0);
  const Tensor zero(DType::kF64, {17});
  ATOLL_ASSERT_OK_AND_ASSIGN(const AdamState adam, AdamUpdate(p, g, zero, zero, 1, {}));
  for (size_t i = 0; i < pv.size(); ++i) {
    // Step 1 from zero moments: m^ = g, v^ = g^2, so the update is lr g / (|g| + eps).
    ref[i] = pv[i] - 1e-3 * gv[i] / (std::abs(gv[i]) + 1e-8);
  }
  ExpectF64(adam.param, {17}, ref);
}

TEST(F64KernelTest, RowOpsTakeF64ValuesAndI64Ids) {
  std::mt19937 rng(646);
  const Tensor table = RandomF64(rng, {4, 3});
  const Tensor ids = Tensor::I64({5}, {3, 0, 3, 1, 2});
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor rows, EmbeddingGather(table, ids));
  const auto tv = table.ToDoubles();
  std::vector<double> want;
  for (int64_t id : ids.as<int64_t>()) {
    for (int64_t j = 0; j < 3; ++j) want.push_back(tv[id * 3 + j]);
  }
  ExpectF64(rows, {5, 3}, want, 0);
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor scattered, EmbeddingGrad(rows, ids, 4));
  std::vector<double> sums(12, 0.0);
  for (size_t i = 0; i < 5; ++i) {
    for (int64_t j = 0; j < 3; ++j) sums[ids.as<int64_t>()[i] * 3 + j] += want[i * 3 + j];
  }
  ExpectF64(scattered, {4, 3}, sums, 0);
  ExpectInvalid(EmbeddingGather(table, Tensor::I64({1}, {4})), {"id 4"});

  const Tensor x = Tensor::F64({1, 4}, {0.1, 0.1 + 1e-15, -3, 0.1});
  ATOLL_ASSERT_OK_AND_ASSIGN(const TopKResult top, TopK(x, 2));
  EXPECT_EQ(top.values.dtype(), DType::kF64);
  EXPECT_EQ(top.indices.ToDoubles(), (std::vector<double>{1, 0}));  // a difference f32 loses
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor t, Transpose2D(Tensor::F64({1, 2}, {1.5, -2.25})));
  EXPECT_EQ(t, Tensor::F64({2, 1}, {1.5, -2.25}));
}

TEST(F64KernelTest, AllReduceSumsEveryDTypeInShardOrder) {
  std::mt19937 rng(647);
  std::vector<Tensor> shards = {RandomF64(rng, {9}), RandomF64(rng, {9}), RandomF64(rng, {9})};
  ATOLL_ASSERT_OK_AND_ASSIGN(const std::vector<Tensor> out, AllReduceSum(shards));
  std::vector<double> ref(9, 0.0);
  for (const Tensor& s : shards) {
    for (size_t i = 0; i < 9; ++i) ref[i] += s.ToDoubles()[i];
  }
  ExpectF64(out[2], {9}, ref, 0);
  const std::vector<Tensor> ints = {Tensor::I64({1}, {std::numeric_limits<int64_t>::max()}),
                                    Tensor::I64({1}, {2})};
  ATOLL_ASSERT_OK_AND_ASSIGN(const std::vector<Tensor> wrapped, AllReduceSum(ints));
  EXPECT_EQ(wrapped[0].as<int64_t>()[0], std::numeric_limits<int64_t>::min() + 1);
  // bf16 sums in f32 and rounds once: 1 + 2^-8 + 2^-8 is 1 + 2^-7, which bf16 holds; summed
  // in bf16 each 2^-8 would tie and round away.
  std::vector<Tensor> halves;
  for (double v : {1.0, 0x1p-8, 0x1p-8})
    halves.push_back(Tensor::FromDoubles(DType::kBF16, {1}, {v}).value());
  ATOLL_ASSERT_OK_AND_ASSIGN(const std::vector<Tensor> half_sum, AllReduceSum(halves));
  EXPECT_EQ(half_sum[0].dtype(), DType::kBF16);
  EXPECT_EQ(half_sum[0].ToDoubles()[0], 1 + 0x1p-7);
}

}  // namespace
}  // namespace atl::kernels
