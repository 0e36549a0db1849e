// The cpu kernels against straightforward reference loops on random inputs.
#include "compute/kernels.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

using testutil::RandomF32;
using testutil::RandomF32Divisor;
using testutil::RandomI32;

constexpr BinaryOp kOps[] = {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv};

// Odd shapes on purpose: 1x1, primes, empty, rank 0, 1 and 3.
const std::vector<Shape> kShapes = {{1, 1}, {7, 13}, {0, 5}, {3}, {2, 3, 4}, {}, {1}, {1000}};

float RefF32(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return a - b;
    case BinaryOp::kMul:
      return a * b;
    case BinaryOp::kDiv:
      return a / b;
  }
  return 0;
}

// Computed in 64 bits, then wrapped to 32 (modular conversion).
int32_t RefI32(BinaryOp op, int32_t a, int32_t b) {
  const int64_t x = a;
  const int64_t y = b;
  switch (op) {
    case BinaryOp::kAdd:
      return static_cast<int32_t>(x + y);
    case BinaryOp::kSub:
      return static_cast<int32_t>(x - y);
    case BinaryOp::kMul:
      return static_cast<int32_t>(x * y);
    case BinaryOp::kDiv:
      return static_cast<int32_t>(x / y);
  }
  return 0;
}

Tensor RandomOperand(std::mt19937& rng, DType dtype, const Shape& shape, bool divisor) {
  if (dtype == DType::kF32) return divisor ? RandomF32Divisor(rng, shape) : RandomF32(rng, shape);
  return RandomI32(rng, shape, -1000, 1000, divisor);
}

// Checks out[i] == ref(i) exactly: the kernels do the same single float operation as the
// reference, so there is no rounding difference to allow for.
void ExpectElements(const Tensor& out, DType dtype, const Shape& shape,
                    const std::function<double(int64_t)>& ref) {
  ASSERT_EQ(out.dtype(), dtype);
  ASSERT_EQ(out.shape(), shape);
  const std::vector<double> got = out.ToDoubles();
  ASSERT_EQ(static_cast<int64_t>(got.size()), NumElements(shape));
  for (int64_t i = 0; i < NumElements(shape); ++i) {
    ASSERT_EQ(got[i], ref(i)) << "element " << i;
  }
}

TEST(BinaryTest, TensorTensorMatchesReference) {
  std::mt19937 rng(1);
  for (DType dtype : {DType::kF32, DType::kI32}) {
    for (BinaryOp op : kOps) {
      for (const Shape& shape : kShapes) {
        SCOPED_TRACE(std::string(DTypeName(dtype)) + " " + std::string(BinaryOpName(op)) + " " +
                     ShapeString(shape));
        const Tensor a = RandomOperand(rng, dtype, shape, false);
        const Tensor b = RandomOperand(rng, dtype, shape, op == BinaryOp::kDiv);
        ATOLL_ASSERT_OK_AND_ASSIGN(Tensor out, Binary(op, a, b));
        if (dtype == DType::kF32) {
          ExpectElements(out, dtype, shape,
                         [&](int64_t i) { return RefF32(op, a.as<float>()[i], b.as<float>()[i]); });
        } else {
          ExpectElements(out, dtype, shape, [&](int64_t i) {
            return RefI32(op, a.as<int32_t>()[i], b.as<int32_t>()[i]);
          });
        }
      }
    }
  }
}

TEST(BinaryTest, TensorScalarAndScalarTensorMatchReference) {
  std::mt19937 rng(2);
  for (DType dtype : {DType::kF32, DType::kI32}) {
    const double scalar = dtype == DType::kF32 ? -1.75 : -7;
    for (BinaryOp op : kOps) {
      for (const Shape& shape : kShapes) {
        SCOPED_TRACE(std::string(DTypeName(dtype)) + " " + std::string(BinaryOpName(op)) + " " +
                     ShapeString(shape));
        const Tensor t = RandomOperand(rng, dtype, shape, op == BinaryOp::kDiv);
        ATOLL_ASSERT_OK_AND_ASSIGN(Tensor right, Binary(op, t, scalar));
        ATOLL_ASSERT_OK_AND_ASSIGN(Tensor left, Binary(op, scalar, t));
        if (dtype == DType::kF32) {
          const auto s = static_cast<float>(scalar);
          ExpectElements(right, dtype, shape,
                         [&](int64_t i) { return RefF32(op, t.as<float>()[i], s); });
          ExpectElements(left, dtype, shape,
                         [&](int64_t i) { return RefF32(op, s, t.as<float>()[i]); });
        } else {
          const auto s = static_cast<int32_t>(scalar);
          ExpectElements(right, dtype, shape,
                         [&](int64_t i) { return RefI32(op, t.as<int32_t>()[i], s); });
          ExpectElements(left, dtype, shape,
                         [&](int64_t i) { return RefI32(op, s, t.as<int32_t>()[i]); });
        }
      }
    }
  }
}

TEST(BinaryTest, ScalarIsAppliedInTheTensorDType) {
  // 0.1 as a float, not as a double: the result is exactly float(1) + float(0.1).
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor f, Binary(BinaryOp::kAdd, Tensor::F32({1}, {1.0f}), 0.1));
  EXPECT_EQ(f.as<float>()[0], 1.0f + 0.1f);
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor i, Binary(BinaryOp::kDiv, Tensor::I32({2}, {7, -7}), 2.0));
  EXPECT_EQ(i, Tensor::I32({2}, {3, -3}));  // truncation toward zero
}

TEST(BinaryTest, I32WrapsAroundInsteadOfOverflowing) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  const Tensor a = Tensor::I32({3}, {kMax, kMin, 65536});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor sum, Binary(BinaryOp::kAdd, a, Tensor::I32({3}, {1, -1, 0})));
  EXPECT_EQ(sum, Tensor::I32({3}, {kMin, kMax, 65536}));
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor product, Binary(BinaryOp::kMul, a, 65536.0));
  EXPECT_EQ(product, Tensor::I32({3}, {-65536, 0, 0}));
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor quotient, Binary(BinaryOp::kDiv, a, -1.0));
  EXPECT_EQ(quotient, Tensor::I32({3}, {-kMax, kMin, -65536}));
}

TEST(BinaryTest, I32DivisionByZeroIsInvalidArgument) {
  const Tensor a = Tensor::I32({3}, {1, 2, 3});
  const Tensor with_zero = Tensor::I32({3}, {1, 0, 1});
  for (const Status& s :
       {Binary(BinaryOp::kDiv, a, with_zero).status(), Binary(BinaryOp::kDiv, a, 0.0).status(),
        Binary(BinaryOp::kDiv, 5.0, with_zero).status()}) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("division by zero"), std::string::npos) << s.ToString();
  }
}

TEST(BinaryTest, F32DivisionByZeroFollowsIeee) {
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor out, Binary(BinaryOp::kDiv, Tensor::F32({3}, {1, -1, 0}), 0.0));
  EXPECT_EQ(out.as<float>()[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(out.as<float>()[1], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(out.as<float>()[2]));
}

TEST(BinaryTest, I32ScalarMustBeAWholeNumberInRange) {
  const Tensor a = Tensor::I32({2}, {1, 2});
  for (double bad : {2.5, 3e9, -3e9, std::nan(""), std::numeric_limits<double>::infinity()}) {
    EXPECT_EQ(Binary(BinaryOp::kAdd, a, bad).status().code(), Code::kInvalidArgument) << bad;
    EXPECT_EQ(Binary(BinaryOp::kAdd, bad, a).status().code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(Binary(BinaryOp::kAdd, a, -2147483648.0).ok());
  EXPECT_TRUE(Binary(BinaryOp::kAdd, a, 2147483647.0).ok());
}

TEST(BinaryTest, ShapeMismatchIsInvalidArgumentNamingBothShapes) {
  const Status s =
      Binary(BinaryOp::kAdd, Tensor(DType::kF32, {2, 3}), Tensor(DType::kF32, {3, 2})).status();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("f32[2,3]"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("f32[3,2]"), std::string::npos) << s.ToString();
  // Same element count, different shape.
  EXPECT_EQ(
      Binary(BinaryOp::kSub, Tensor(DType::kF32, {6}), Tensor(DType::kF32, {2, 3})).status().code(),
      Code::kInvalidArgument);
}

TEST(BinaryTest, DTypeMismatchIsInvalidArgument) {
  const Status s =
      Binary(BinaryOp::kMul, Tensor(DType::kF32, {2}), Tensor(DType::kI32, {2})).status();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("i32[2]"), std::string::npos) << s.ToString();
}

TEST(BinaryTest, MalformedTensorsAreInvalidArgument) {
  const Tensor no_bytes;  // rank 0 claims one element but holds no bytes
  const Tensor unknown_dtype(static_cast<DType>(7), {2});
  const Tensor ok(DType::kF32, {});
  for (const Tensor* bad : {&no_bytes, &unknown_dtype}) {
    EXPECT_EQ(Binary(BinaryOp::kAdd, *bad, *bad).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(Binary(BinaryOp::kAdd, ok, *bad).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(Binary(BinaryOp::kAdd, *bad, 1.0).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(Binary(BinaryOp::kAdd, 1.0, *bad).status().code(), Code::kInvalidArgument);
  }
}

// ---------------------------------------------------------------------------------------

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

TEST(SpinTest, ZeroReturnsTheInputAtOnce) {
  const Tensor t = Tensor::I32({2}, {4, 5});
  const auto start = std::chrono::steady_clock::now();
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor out, Spin(t, 0));
  EXPECT_EQ(out, t);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
}

TEST(SpinTest, KeepsTheThreadBusyForTheGivenTime) {
  std::mt19937 rng(4);
  const Tensor t = RandomF32(rng, {3, 5});
  const double cpu_start = ThreadCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor out, Spin(t, 20000));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(out, t);
  EXPECT_GE(elapsed, std::chrono::milliseconds(20));
  // Busy, not asleep: the thread burnt CPU (loosely bounded: a loaded machine preempts it).
  EXPECT_GE(ThreadCpuSeconds() - cpu_start, 0.002);
}

TEST(SpinTest, BadTimesAreInvalidArgument) {
  const Tensor t(DType::kF32, {1});
  for (double bad :
       {-1.0, std::nan(""), std::numeric_limits<double>::infinity(), kMaxSpinMicros * 2}) {
    EXPECT_EQ(Spin(t, bad).status().code(), Code::kInvalidArgument) << bad;
  }
}

// ---------------------------------------------------------------------------------------

TEST(FilterTest, KeepsTheElementsAboveTheThresholdInOrder) {
  std::mt19937 rng(11);
  for (int64_t n : {0, 1, 7, 33}) {
    const Tensor t = RandomF32(rng, {n});
    std::vector<float> want;
    for (float v : t.as<float>()) {
      if (v > 0.25) want.push_back(v);
    }
    ATOLL_ASSERT_OK_AND_ASSIGN(Tensor out, Filter(t, 0.25));
    EXPECT_EQ(out, Tensor::F32({static_cast<int64_t>(want.size())}, want)) << n;
  }
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor ints, Filter(Tensor::I32({5}, {3, -1, 4, 1, -5}), 1));
  EXPECT_EQ(ints, Tensor::I32({2}, {3, 4}));
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor none, Filter(Tensor::I32({2}, {1, 1}), 1));
  EXPECT_EQ(none.shape(), (Shape{0}));
}

TEST(FilterTest, OnlyOneDimensionalTensors) {
  const Status s = Filter(Tensor(DType::kF32, {2, 2}), 0).status();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("1-D"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace atl::kernels
