// kernels::Unary, BroadcastBinary and EvalFused against per-element reference loops.
#include "kernels/elementwise.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/kernels/kernel_checks.h"
#include "tests/kernels/reference_ops.h"
#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

using testutil::DomainOf;
using testutil::ExpectClose;
using testutil::ExpectInvalid;
using testutil::RandomF32;
using testutil::RefBinary;
using testutil::RefUnary;

const std::vector<Shape> kElementwiseShapes = {{1}, {7}, {13, 33}, {3, 1, 7}, {}, {0, 4}, {1000}};

constexpr BinaryFn kBinary[] = {BinaryFn::kAdd, BinaryFn::kSub, BinaryFn::kMul,
                                BinaryFn::kDiv, BinaryFn::kMax, BinaryFn::kMin};

std::vector<double> Map(const std::vector<double>& x, const std::function<double(double)>& f) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = f(x[i]);
  return y;
}

TEST(ElementwiseKernelTest, UnaryMatchesReference) {
  std::mt19937 rng(21);
  for (UnaryFn fn : kUnaryFns) {
    for (const Shape& shape : kElementwiseShapes) {
      const Tensor x = RandomF32(rng, shape, DomainOf(fn).lo, DomainOf(fn).hi);
      ATOLL_ASSERT_OK_AND_ASSIGN(Tensor y, Unary(fn, x));
      SCOPED_TRACE(testing::Message() << UnaryFnName(fn) << " " << ShapeString(shape));
      ExpectClose(y, shape, Map(x.ToDoubles(), [fn](double v) { return RefUnary(fn, v); }), 1e-6,
                  2e-6);
    }
  }
}

// dy * f'(x) for every unary op, against a central difference of its double reference.
TEST(ElementwiseKernelTest, UnaryBackwardMatchesTheReferencesDerivative) {
  std::mt19937 rng(23);
  for (UnaryFn fn : kUnaryFns) {
    for (const Shape& shape : kElementwiseShapes) {
      const Tensor x = RandomF32(rng, shape, DomainOf(fn).lo, DomainOf(fn).hi);
      const Tensor dy = RandomF32(rng, shape);
      ATOLL_ASSERT_OK_AND_ASSIGN(Tensor dx, UnaryBackward(fn, dy, x));
      const std::vector<double> xs = x.ToDoubles(), dys = dy.ToDoubles();
      std::vector<double> want(xs.size());
      for (size_t i = 0; i < xs.size(); ++i) {
        const double h = 1e-6 * std::max(1.0, std::abs(xs[i]));
        want[i] = dys[i] * (RefUnary(fn, xs[i] + h) - RefUnary(fn, xs[i] - h)) / (2 * h);
      }
      SCOPED_TRACE(testing::Message() << UnaryFnName(fn) << " " << ShapeString(shape));
      ExpectClose(dx, shape, want, 1e-5, 2e-5);
    }
  }
  ExpectInvalid(UnaryBackward(UnaryFn::kExp, Tensor(DType::kF32, {3}), Tensor(DType::kF32, {4})),
                {"exp backward dy", "f32[4]", "f32[3]"});
  ExpectInvalid(UnaryBackward(UnaryFn::kLog, Tensor(DType::kF32, {3}), Tensor(DType::kI32, {3})),
                {"log backward x", "must be f32"});
  ExpectInvalid(
      UnaryBackward(static_cast<UnaryFn>(200), Tensor(DType::kF32, {1}), Tensor(DType::kF32, {1})),
      {"unknown unary op 200"});
}

TEST(ElementwiseKernelTest, UnaryEdgeValuesFollowIeee) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = Tensor::F32({4}, {0.0f, -1.0f, nan, inf});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor log, Unary(UnaryFn::kLog, x));
  ExpectClose(log, {4}, {-INFINITY, NAN, NAN, INFINITY});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor relu, Unary(UnaryFn::kRelu, x));
  ExpectClose(relu, {4}, {0, 0, NAN, INFINITY});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor rsqrt, Unary(UnaryFn::kRsqrt, x));
  ExpectClose(rsqrt, {4}, {INFINITY, NAN, NAN, 0});
  // exp and tanh (vectorized, kernels/vector_math.h) at their limits, over a length that
  // ends mid-vector.
  const Tensor e = Tensor::F32({7}, {-inf, inf, nan, 89.0f, -105.0f, -0.0f, 1e-30f});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor exp, Unary(UnaryFn::kExp, e));
  ExpectClose(exp, {7}, {0, INFINITY, NAN, INFINITY, 0, 1, 1});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor tanh, Unary(UnaryFn::kTanh, e));
  ExpectClose(tanh, {7}, {-1, 1, NAN, 1, -1, 0, 1e-30}, 0, 1e-7);
  EXPECT_TRUE(std::signbit(tanh.as<float>()[5])) << "tanh(-0) = -0";
}

TEST(ElementwiseKernelTest, SigmoidSaturatesWithoutNan) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = Tensor::F32({7}, {-inf, -100.0f, -1.0f, 0.0f, 1.0f, 100.0f, inf});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor y, Unary(UnaryFn::kSigmoid, x));
  ExpectClose(y, {7}, Map(x.ToDoubles(), [](double v) { return RefUnary(UnaryFn::kSigmoid, v); }),
              1e-7, 1e-6);
  EXPECT_EQ(y.as<float>()[0], 0.0f);
  EXPECT_EQ(y.as<float>()[3], 0.5f);
  EXPECT_EQ(y.as<float>()[6], 1.0f);
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor of_nan, Unary(UnaryFn::kSigmoid, Tensor::F32({1}, {nan})));
  EXPECT_TRUE(std::isnan(of_nan.as<float>()[0]));
}

TEST(ElementwiseKernelTest, BroadcastBinaryMatchesNumpyRules) {
  std::mt19937 rng(22);
  struct Case {
    Shape a, b, out;
  };
  const Case cases[] = {{{7, 13}, {7, 13}, {7, 13}},    {{7, 13}, {13}, {7, 13}},
                        {{13}, {7, 13}, {7, 13}},       {{7, 1}, {7, 13}, {7, 13}},
                        {{7, 13}, {}, {7, 13}},         {{1}, {33}, {33}},
                        {{3, 1, 5}, {4, 1}, {3, 4, 5}}, {{0, 3}, {3}, {0, 3}}};
  for (BinaryFn fn : kBinary) {
    for (const Case& c : cases) {
      const Tensor a = RandomF32(rng, c.a);
      const Tensor b =
          fn == BinaryFn::kDiv ? testutil::RandomF32Divisor(rng, c.b) : RandomF32(rng, c.b);
      ATOLL_ASSERT_OK_AND_ASSIGN(Tensor z, BroadcastBinary(fn, a, b));
      // Reference: index each operand through its right-aligned, 1-stretched dimensions.
      const std::vector<double> av = a.ToDoubles(), bv = b.ToDoubles();
      const int64_t total = NumElements(c.out);
      std::vector<double> ref(total);
      const auto offset = [&c](const Shape& s, int64_t flat) {
        int64_t off = 0, stride = 1;
        for (size_t i = 0; i < s.size(); ++i) {
          const size_t d_out = c.out.size() - 1 - i;
          int64_t suffix = 1;
          for (size_t e = d_out + 1; e < c.out.size(); ++e) suffix *= c.out[e];
          const int64_t idx = (flat / suffix) % c.out[d_out];
          const int64_t dim = s[s.size() - 1 - i];
          off += (dim == 1 ? 0 : idx) * stride;
          stride *= dim;
        }
        return off;
      };
      for (int64_t i = 0; i < total; ++i) {
        ref[i] = RefBinary(fn, av[offset(c.a, i)], bv[offset(c.b, i)]);
      }
      SCOPED_TRACE(testing::Message()
                   << BinaryFnName(fn) << " " << ShapeString(c.a) << " vs " << ShapeString(c.b));
      ExpectClose(z, c.out, ref, 1e-6, 1e-6);
    }
  }
}

TEST(ElementwiseKernelTest, BroadcastBinaryRejectsClashesAndDTypes) {
  ExpectInvalid(
      BroadcastBinary(BinaryFn::kAdd, Tensor(DType::kF32, {7, 13}), Tensor(DType::kF32, {7})),
      {"add", "f32[7,13]", "f32[7]", "13 against 7"});
  ExpectInvalid(BroadcastBinary(BinaryFn::kMul, Tensor(DType::kI32, {3}), Tensor(DType::kF32, {3})),
                {"must be f32", "i32[3]"});
}

TEST(ElementwiseKernelTest, MaxAndMinPropagateNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor a = Tensor::F32({3}, {nan, 1.0f, 2.0f});
  const Tensor b = Tensor::F32({3}, {1.0f, nan, 3.0f});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor mx, BroadcastBinary(BinaryFn::kMax, a, b));
  ExpectClose(mx, {3}, {NAN, NAN, 3});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor mn, BroadcastBinary(BinaryFn::kMin, a, b));
  ExpectClose(mn, {3}, {NAN, NAN, 2});
}

// relu(in0 * in1 + in2) * 0.5 - tanh(in0) / exp(in2), over shapes that end mid-block.
TEST(ElementwiseKernelTest, FusedExpressionMatchesStepByStepReference) {
  FusedExpr e;
  const FusedValue x = e.Input(0), w = e.Input(1), b = e.Input(2);
  const FusedValue lin = e.Apply(BinaryFn::kAdd, e.Apply(BinaryFn::kMul, x, w), b);
  const FusedValue act = e.Apply(BinaryFn::kMul, e.Apply(UnaryFn::kRelu, lin), e.Constant(0.5f));
  e.Apply(BinaryFn::kSub, act,
          e.Apply(BinaryFn::kDiv, e.Apply(UnaryFn::kTanh, x), e.Apply(UnaryFn::kExp, b)));
  EXPECT_EQ(e.ToString(), "sub(mul(relu(add(mul(in0, in1), in2)), 0.5), div(tanh(in0), exp(in2)))");
  std::mt19937 rng(23);
  for (const Shape& shape :
       std::vector<Shape>{{1}, {7}, {13, 33}, {511}, {513}, {3, 1025}, {}, {0}}) {
    std::vector<Tensor> in = {RandomF32(rng, shape), RandomF32(rng, shape), RandomF32(rng, shape)};
    ATOLL_ASSERT_OK_AND_ASSIGN(Tensor y, EvalFused(e, in));
    const auto xv = in[0].ToDoubles(), wv = in[1].ToDoubles(), bv = in[2].ToDoubles();
    std::vector<double> ref(xv.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      const double l = xv[i] * wv[i] + bv[i];
      ref[i] = (l < 0 ? 0 : l) * 0.5 - std::tanh(xv[i]) / std::exp(bv[i]);
    }
    SCOPED_TRACE(ShapeString(shape));
    ExpectClose(y, shape, ref, 1e-5, 1e-5);
  }
}

TEST(ElementwiseKernelTest, FusedExpressionOfOneInputOrConstantCopiesIt) {
  std::mt19937 rng(24);
  std::vector<Tensor> in = {RandomF32(rng, {33})};
  FusedExpr just_input;
  just_input.Input(0);
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor y, EvalFused(just_input, in));
  EXPECT_EQ(y, in[0]);
  FusedExpr constant;
  constant.Constant(2.5f);
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor c, EvalFused(constant, in));
  ExpectClose(c, {33}, std::vector<double>(33, 2.5));
}

// kBroadcast nodes read a smaller input in place (a row along the last dimension, a column
// along the first), block by block across a result longer than one block.
TEST(ElementwiseKernelTest, FusedBroadcastsMatchIndexByIndexLoops) {
  std::mt19937 rng(5);
  const Tensor x = RandomF32(rng, {3, 700});
  const Tensor row = RandomF32(rng, {700});
  const Tensor column = RandomF32(rng, {3, 1});
  FusedExpr e;
  e.Apply(BinaryFn::kMul, e.Apply(BinaryFn::kSub, e.Input(0), e.Broadcast(1, {1})),
          e.Broadcast(2, {0, 1}));
  const std::vector<const Tensor*> in = {&x, &row, &column};
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor y, EvalFused(e, in, x.shape()));
  std::vector<double> ref(3 * 700);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 700; ++j) {
      const float d = x.as<float>()[i * 700 + j] - row.as<float>()[j];  // in f32, as fused
      ref[i * 700 + j] = d * column.as<float>()[i];
    }
  }
  ExpectClose(y, {3, 700}, ref, 1e-6, 1e-6);
  FusedExpr bad;
  bad.Apply(BinaryFn::kAdd, bad.Input(0), bad.Broadcast(1, {0}));  // 700 along size 3
  ExpectInvalid(EvalFused(bad, in, x.shape()), {"does not broadcast", "f32[700]", "[3,700]"});
}

TEST(ElementwiseKernelTest, FusedRejectsMalformedExpressionsAndInputs) {
  std::vector<Tensor> one = {Tensor(DType::kF32, {3})};
  ExpectInvalid(EvalFused(FusedExpr(), one), {"no nodes"});
  FusedExpr reads_input_1;
  reads_input_1.Input(1);
  ExpectInvalid(EvalFused(reads_input_1, one), {"reads input 1", "[0, 1)"});
  FusedExpr forward_ref;
  forward_ref.Apply(UnaryFn::kExp, FusedValue{0});
  ExpectInvalid(EvalFused(forward_ref, one), {"exp", "reads node 0"});
  FusedExpr ok;
  ok.Apply(BinaryFn::kAdd, ok.Input(0), ok.Input(1));
  std::vector<Tensor> mismatched = {Tensor(DType::kF32, {3}), Tensor(DType::kF32, {4})};
  ExpectInvalid(EvalFused(ok, mismatched), {"one shape", "f32[3]", "f32[4]"});
  std::vector<Tensor> wrong_dtype = {Tensor(DType::kF32, {3}), Tensor(DType::kI32, {3})};
  ExpectInvalid(EvalFused(ok, wrong_dtype), {"fused input 1", "must be f32"});
  ExpectInvalid(EvalFused(ok, std::span<const Tensor>()), {"at least one input"});
  ExpectInvalid(Unary(UnaryFn::kExp, Tensor(DType::kI32, {2})), {"exp", "must be f32", "i32[2]"});
}

}  // namespace
}  // namespace atl::kernels
