// kernels/nn.h against double-precision references; every backward against central finite
// differences of its reference forward (GELU's forward is UnaryFn::kGelu of elementwise.h).
#include "kernels/nn.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/elementwise.h"
#include "tests/kernels/kernel_checks.h"
#include "tests/kernels/reference_ops.h"
#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

using testutil::Dot;
using testutil::ExpectClose;
using testutil::ExpectInvalid;
using testutil::F32From;
using testutil::NumericGrad;
using testutil::RandomF32;
using testutil::RandomI32;
using testutil::RefCrossEntropy;
using testutil::RefLayerNorm;
using testutil::RefSoftmax;

double RefGelu(double x) { return testutil::RefUnary(UnaryFn::kGelu, x); }

TEST(SoftmaxKernelTest, MatchesReferenceAndIsStableForLargeInputs) {
  std::mt19937 rng(41);
  for (const Shape& shape : std::vector<Shape>{{1}, {7}, {13, 33}, {3, 1, 7}, {5, 1}, {0, 3}}) {
    const Tensor x = RandomF32(rng, shape, -20.0f, 20.0f);
    ATOLL_ASSERT_OK_AND_ASSIGN(Tensor y, Softmax(x));
    SCOPED_TRACE(ShapeString(shape));
    ExpectClose(y, shape, RefSoftmax(x.ToDoubles(), shape.back()), 1e-7, 1e-5);
  }
  const Tensor big = Tensor::F32({1, 3}, {1000.0f, 1000.0f, -1000.0f});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor y, Softmax(big));
  ExpectClose(y, {1, 3}, {0.5, 0.5, 0.0});
  ExpectInvalid(Softmax(Tensor(DType::kF32, {})), {"rank >= 1"});
  ExpectInvalid(Softmax(Tensor(DType::kI32, {3})), {"must be f32", "i32[3]"});
}

TEST(SoftmaxKernelTest, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(45);
  constexpr int64_t kWidth = 5;
  const Tensor x = RandomF32(rng, {3, kWidth}, -2.0f, 2.0f);
  const Tensor dy = RandomF32(rng, {3, kWidth});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor y, Softmax(x));
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor dx, SoftmaxBackward(dy, y));
  const std::vector<double> dys = dy.ToDoubles();
  const std::vector<double> numeric = NumericGrad(
      [&](const std::vector<double>& v) {
        const std::vector<double> s = RefSoftmax(v, kWidth);
        double dot = 0;
        for (size_t i = 0; i < s.size(); ++i) dot += dys[i] * s[i];
        return dot;
      },
      x.ToDoubles());
  ExpectClose(dx, {3, kWidth}, numeric, 1e-5, 1e-4);
  ExpectInvalid(SoftmaxBackward(Tensor(DType::kF32, {2, 3}), Tensor(DType::kF32, {2, 4})),
                {"softmax backward dy", "f32[2,4]"});
}

TEST(LayerNormKernelTest, ForwardMatchesReference) {
  std::mt19937 rng(42);
  for (const Shape& shape : std::vector<Shape>{{1, 7}, {13, 33}, {2, 3, 13}, {7}, {4, 1}}) {
    const int64_t d = shape.back();
    const Tensor x = RandomF32(rng, shape), g = RandomF32(rng, {d}), b = RandomF32(rng, {d});
    ATOLL_ASSERT_OK_AND_ASSIGN(Tensor y, LayerNorm(x, g, b, 1e-5f));
    SCOPED_TRACE(ShapeString(shape));
    ExpectClose(y, shape, RefLayerNorm(x.ToDoubles(), g.ToDoubles(), b.ToDoubles(), 1e-5), 1e-5,
                1e-5);
  }
}

// L = sum(w * layer_norm(x, g, b)): the backward with dy = w against finite differences.
TEST(LayerNormKernelTest, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(43);
  const double eps = 1e-3;
  for (const Shape& shape : std::vector<Shape>{{1, 7}, {5, 13}, {2, 3, 4}, {3, 1}}) {
    const int64_t d = shape.back();
    const Tensor x = RandomF32(rng, shape), g = RandomF32(rng, {d}), b = RandomF32(rng, {d});
    const Tensor w = RandomF32(rng, shape);
    ATOLL_ASSERT_OK_AND_ASSIGN(LayerNormGrads grads,
                               LayerNormBackward(w, x, g, static_cast<float>(eps)));
    const auto xv = x.ToDoubles(), gv = g.ToDoubles(), bv = b.ToDoubles(), wv = w.ToDoubles();
    const auto dx =
        NumericGrad([&](const auto& v) { return Dot(wv, RefLayerNorm(v, gv, bv, eps)); }, xv);
    const auto dg =
        NumericGrad([&](const auto& v) { return Dot(wv, RefLayerNorm(xv, v, bv, eps)); }, gv);
    const auto db =
        NumericGrad([&](const auto& v) { return Dot(wv, RefLayerNorm(xv, gv, v, eps)); }, bv);
    SCOPED_TRACE(ShapeString(shape));
    ExpectClose(grads.dx, shape, dx, 1e-3, 1e-3);
    ExpectClose(grads.dgamma, {d}, dg, 1e-3, 1e-3);
    ExpectClose(grads.dbeta, {d}, db, 1e-3, 1e-3);
  }
}

TEST(LayerNormKernelTest, RejectsMismatchedParameters) {
  const Tensor x(DType::kF32, {4, 7});
  const Tensor g(DType::kF32, {7});
  ExpectInvalid(LayerNorm(x, Tensor(DType::kF32, {6}), g), {"gamma", "f32[7]", "f32[6]"});
  ExpectInvalid(LayerNorm(x, g, Tensor(DType::kI32, {7})), {"beta", "must be f32"});
  ExpectInvalid(LayerNorm(x, g, g, 0.0f), {"epsilon"});
  ExpectInvalid(LayerNormBackward(Tensor(DType::kF32, {4, 6}), x, g),
                {"dy", "f32[4,7]", "f32[4,6]"});
}

TEST(GeluKernelTest, ForwardAndBackwardMatchReferenceAndFiniteDifferences) {
  std::mt19937 rng(44);
  for (const Shape& shape : std::vector<Shape>{{1}, {7}, {13, 33}, {}}) {
    const Tensor x = RandomF32(rng, shape, -6.0f, 6.0f);
    const Tensor dy = RandomF32(rng, shape);
    ATOLL_ASSERT_OK_AND_ASSIGN(Tensor y, Unary(UnaryFn::kGelu, x));
    const auto xv = x.ToDoubles(), dyv = dy.ToDoubles();
    std::vector<double> ref(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) ref[i] = RefGelu(xv[i]);
    SCOPED_TRACE(ShapeString(shape));
    ExpectClose(y, shape, ref, 1e-6, 1e-5);
    ATOLL_ASSERT_OK_AND_ASSIGN(Tensor dx, GeluBackward(dy, x));
    std::vector<double> numeric(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) {
      const double h = 1e-5;
      numeric[i] = dyv[i] * (RefGelu(xv[i] + h) - RefGelu(xv[i] - h)) / (2 * h);
    }
    ExpectClose(dx, shape, numeric, 1e-5, 1e-4);
  }
  ExpectInvalid(GeluBackward(Tensor(DType::kF32, {3}), Tensor(DType::kF32, {4})),
                {"dy", "f32[4]", "f32[3]"});
  ExpectInvalid(Unary(UnaryFn::kGelu, Tensor(DType::kI32, {3})), {"gelu", "must be f32"});
}

TEST(CrossEntropyKernelTest, LossAndGradientMatchReferenceAndFiniteDifferences) {
  std::mt19937 rng(45);
  for (const Shape& shape : std::vector<Shape>{{1, 1}, {1, 7}, {7, 13}, {13, 33}, {33, 2}}) {
    const Tensor logits = RandomF32(rng, shape, -8.0f, 8.0f);
    const Tensor labels = RandomI32(rng, {shape[0]}, 0, static_cast<int32_t>(shape[1] - 1));
    ATOLL_ASSERT_OK_AND_ASSIGN(CrossEntropyResult r, CrossEntropy(logits, labels));
    const auto lv = logits.ToDoubles();
    const std::vector<double> yv = labels.ToDoubles();
    SCOPED_TRACE(ShapeString(shape));
    ExpectClose(r.loss, {}, {RefCrossEntropy(lv, yv, shape[1])}, 1e-5, 1e-5);
    const auto numeric =
        NumericGrad([&](const auto& v) { return RefCrossEntropy(v, yv, shape[1]); }, lv);
    ExpectClose(r.dlogits, shape, numeric, 1e-6, 1e-4);
  }
  // Stable for huge logits.
  ATOLL_ASSERT_OK_AND_ASSIGN(
      CrossEntropyResult big,
      CrossEntropy(Tensor::F32({1, 2}, {1000.0f, -1000.0f}), Tensor::I32({1}, {0})));
  ExpectClose(big.loss, {}, {0.0});
}

// A confident prediction: p[label] = 1 / (1 + 2 e^-30), so its gradient p - 1 is about
// -1.9e-13, which p computed in f32 and then less 1 would round to 0.
TEST(CrossEntropyKernelTest, GradientOfAConfidentLabelKeepsItsPrecision) {
  ATOLL_ASSERT_OK_AND_ASSIGN(
      CrossEntropyResult r,
      CrossEntropy(Tensor::F32({1, 3}, {30.0f, 0.0f, 0.0f}), Tensor::I32({1}, {0})));
  const double others = 2 * std::exp(-30.0);
  ExpectClose(r.dlogits, {1, 3},
              {-others / (1 + others), others / 2 / (1 + others), others / 2 / (1 + others)}, 0,
              1e-6);
  ExpectClose(r.loss, {}, {std::log1p(others)}, 0, 1e-6);
}

TEST(CrossEntropyKernelTest, ANanOrInfiniteLogitGivesANanLoss) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const std::vector<float>& row : std::vector<std::vector<float>>{
           {nan, 1, 2}, {nan, nan, nan}, {inf, 1, 2}, {-inf, -inf, -inf}}) {
    for (int32_t label : {0, 1}) {
      ATOLL_ASSERT_OK_AND_ASSIGN(CrossEntropyResult r,
                                 CrossEntropy(Tensor::F32({1, 3}, row), Tensor::I32({1}, {label})));
      EXPECT_TRUE(std::isnan(r.loss.as<float>()[0]))
          << row[0] << " " << row[1] << " " << row[2] << ", label " << label;
    }
  }
}

TEST(CrossEntropyKernelTest, RejectsBadLabelsAndShapes) {
  const Tensor logits(DType::kF32, {2, 3});
  ExpectInvalid(CrossEntropy(logits, Tensor::I32({2}, {0, 3})), {"label 3 of example 1", "[0, 3)"});
  ExpectInvalid(CrossEntropy(logits, Tensor::I32({2}, {-1, 0})), {"label -1"});
  ExpectInvalid(CrossEntropy(logits, Tensor(DType::kF32, {2})), {"labels", "must be i32"});
  ExpectInvalid(CrossEntropy(logits, Tensor(DType::kI32, {3})), {"i32[2]", "i32[3]"});
  ExpectInvalid(CrossEntropy(Tensor(DType::kF32, {0, 3}), Tensor(DType::kI32, {0})),
                {"b >= 1", "f32[0,3]"});
  ExpectInvalid(CrossEntropy(Tensor(DType::kF32, {6}), Tensor(DType::kI32, {6})),
                {"f32[b,c]", "f32[6]"});
}

}  // namespace
}  // namespace atl::kernels
