// kernels/optim.h: several SGD, momentum and Adam steps against the textbook formulas in
// double.
#include "kernels/optim.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/kernels/kernel_checks.h"
#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

using testutil::ExpectClose;
using testutil::ExpectInvalid;
using testutil::RandomF32;

const std::vector<Shape> kOptimizerShapes = {{1}, {7}, {13, 33}, {0}};

TEST(OptimKernelTest, SgdMatchesReference) {
  std::mt19937 rng(81);
  const SgdOptions options{.learning_rate = 0.1f, .weight_decay = 0.01f};
  for (const Shape& shape : kOptimizerShapes) {
    const Tensor p = RandomF32(rng, shape), g = RandomF32(rng, shape);
    ATOLL_ASSERT_OK_AND_ASSIGN(Tensor next, SgdUpdate(p, g, options));
    const auto pv = p.ToDoubles(), gv = g.ToDoubles();
    std::vector<double> ref(pv.size());
    for (size_t i = 0; i < pv.size(); ++i) ref[i] = pv[i] - 0.1 * (gv[i] + 0.01 * pv[i]);
    ExpectClose(next, shape, ref, 1e-6, 1e-6);
  }
}

TEST(OptimKernelTest, MomentumAndAdamMatchReferenceOverSteps) {
  std::mt19937 rng(82);
  for (const Shape& shape : kOptimizerShapes) {
    SCOPED_TRACE(ShapeString(shape));
    Tensor p = RandomF32(rng, shape);
    std::vector<double> pv = p.ToDoubles(), vel(pv.size(), 0.0);
    Tensor velocity(DType::kF32, shape);
    const SgdOptions sgd{.learning_rate = 0.05f, .momentum = 0.9f, .weight_decay = 0.001f};
    for (int step = 0; step < 4; ++step) {
      const Tensor g = RandomF32(rng, shape);
      const auto gv = g.ToDoubles();
      ATOLL_ASSERT_OK_AND_ASSIGN(SgdMomentumState s, SgdMomentumUpdate(p, g, velocity, sgd));
      for (size_t i = 0; i < pv.size(); ++i) {
        vel[i] = 0.9 * vel[i] + gv[i] + 0.001 * pv[i];
        pv[i] -= 0.05 * vel[i];
      }
      ExpectClose(s.param, shape, pv, 1e-5, 1e-5);
      ExpectClose(s.velocity, shape, vel, 1e-5, 1e-5);
      p = s.param;
      velocity = s.velocity;
    }

    const AdamOptions adam{.learning_rate = 0.01f, .weight_decay = 0.1f};
    Tensor m(DType::kF32, shape), v(DType::kF32, shape);
    pv = p.ToDoubles();
    std::vector<double> mv(pv.size(), 0.0), vv(pv.size(), 0.0);
    for (int64_t step = 1; step <= 5; ++step) {
      const Tensor g = RandomF32(rng, shape);
      const auto gv = g.ToDoubles();
      ATOLL_ASSERT_OK_AND_ASSIGN(AdamState s, AdamUpdate(p, g, m, v, step, adam));
      for (size_t i = 0; i < pv.size(); ++i) {
        mv[i] = 0.9 * mv[i] + 0.1 * gv[i];
        vv[i] = 0.999 * vv[i] + 0.001 * gv[i] * gv[i];
        const double mhat = mv[i] / (1 - std::pow(0.9, step));
        const double vhat = vv[i] / (1 - std::pow(0.999, step));
        pv[i] -= 0.01 * (mhat / (std::sqrt(vhat) + 1e-8) + 0.1 * pv[i]);
      }
      ExpectClose(s.param, shape, pv, 1e-5, 1e-5);
      ExpectClose(s.m, shape, mv, 1e-5, 1e-5);
      ExpectClose(s.v, shape, vv, 1e-5, 1e-5);
      p = s.param;
      m = s.m;
      v = s.v;
    }
  }
}

TEST(OptimKernelTest, RejectsBadTensorsAndHyperParameters) {
  const Tensor p(DType::kF32, {3}), g(DType::kF32, {3});
  ExpectInvalid(SgdUpdate(p, Tensor(DType::kF32, {4}), {}), {"grad", "f32[3]", "f32[4]"});
  ExpectInvalid(SgdUpdate(p, g, {.learning_rate = -1}), {"learning rate", "-1"});
  ExpectInvalid(SgdMomentumUpdate(p, g, Tensor(DType::kI32, {3}), {}), {"velocity", "must be f32"});
  ExpectInvalid(AdamUpdate(p, g, p, p, 0, {}), {"step counts from 1, got 0"});
  ExpectInvalid(AdamUpdate(p, g, p, p, 1, {.beta1 = 1.0f}), {"beta1", "[0, 1)"});
  ExpectInvalid(AdamUpdate(p, g, p, p, 1, {.epsilon = 0}), {"epsilon"});
  ExpectInvalid(AdamUpdate(p, g, Tensor(DType::kF32, {3, 1}), p, 1, {}),
                {"first moment", "f32[3,1]"});
  ExpectInvalid(AdamUpdate(p, g, p, p, 1, {.learning_rate = NAN}), {"learning rate"});
}

}  // namespace
}  // namespace atl::kernels
