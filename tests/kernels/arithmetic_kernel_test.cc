// kernels::Binary (f32 and i32 tensors and scalars) against straightforward reference loops
// on random inputs.
#include "kernels/arithmetic.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/kernels/reference_ops.h"
#include "tests/kernels/test_tensors.h"
#include "tests/status_matchers.h"

namespace atl::kernels {
namespace {

using testutil::RandomF32;
using testutil::RandomF32Divisor;
using testutil::RandomI32;

constexpr BinaryFn kOps[] = {BinaryFn::kAdd, BinaryFn::kSub, BinaryFn::kMul,
                             BinaryFn::kDiv, BinaryFn::kMax, BinaryFn::kMin};

// Odd shapes on purpose: 1x1, primes, empty, rank 0, 1 and 3.
const std::vector<Shape> kArithmeticShapes = {{1, 1},    {7, 13}, {0, 5}, {3},
                                              {2, 3, 4}, {},      {1},    {1000}};

// Each f32 operation rounded once, as the kernel computes it: the double result of one
// +, -, * or / rounds to the same float.
float RefF32(BinaryFn op, float a, float b) {
  return static_cast<float>(testutil::RefBinary(op, a, b));
}

// Computed in 64 bits, then wrapped to 32 (modular conversion).
int32_t RefI32(BinaryFn op, int32_t a, int32_t b) {
  const int64_t x = a;
  const int64_t y = b;
  switch (op) {
    case BinaryFn::kAdd:
      return static_cast<int32_t>(x + y);
    case BinaryFn::kSub:
      return static_cast<int32_t>(x - y);
    case BinaryFn::kMul:
      return static_cast<int32_t>(x * y);
    case BinaryFn::kDiv:
      return static_cast<int32_t>(x / y);
    case BinaryFn::kMax:
      return std::max(a, b);
    case BinaryFn::kMin:
      return std::min(a, b);
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

TEST(ArithmeticKernelTest, TensorTensorMatchesReference) {
  std::mt19937 rng(1);
  for (DType dtype : {DType::kF32, DType::kI32}) {
    for (BinaryFn op : kOps) {
      for (const Shape& shape : kArithmeticShapes) {
        SCOPED_TRACE(std::string(DTypeName(dtype)) + " " + std::string(BinaryFnName(op)) + " " +
                     ShapeString(shape));
        const Tensor a = RandomOperand(rng, dtype, shape, false);
        const Tensor b = RandomOperand(rng, dtype, shape, op == BinaryFn::kDiv);
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

TEST(ArithmeticKernelTest, TensorScalarAndScalarTensorMatchReference) {
  std::mt19937 rng(2);
  for (DType dtype : {DType::kF32, DType::kI32}) {
    const double scalar = dtype == DType::kF32 ? -1.75 : -7;
    for (BinaryFn op : kOps) {
      for (const Shape& shape : kArithmeticShapes) {
        SCOPED_TRACE(std::string(DTypeName(dtype)) + " " + std::string(BinaryFnName(op)) + " " +
                     ShapeString(shape));
        const Tensor t = RandomOperand(rng, dtype, shape, op == BinaryFn::kDiv);
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

TEST(ArithmeticKernelTest, ScalarIsAppliedInTheTensorDType) {
  // 0.1 as a float, not as a double: the result is exactly float(1) + float(0.1).
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor f, Binary(BinaryFn::kAdd, Tensor::F32({1}, {1.0f}), 0.1));
  EXPECT_EQ(f.as<float>()[0], 1.0f + 0.1f);
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor i, Binary(BinaryFn::kDiv, Tensor::I32({2}, {7, -7}), 2.0));
  EXPECT_EQ(i, Tensor::I32({2}, {3, -3}));  // truncation toward zero
}

TEST(ArithmeticKernelTest, I32WrapsAroundInsteadOfOverflowing) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  const Tensor a = Tensor::I32({3}, {kMax, kMin, 65536});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor sum, Binary(BinaryFn::kAdd, a, Tensor::I32({3}, {1, -1, 0})));
  EXPECT_EQ(sum, Tensor::I32({3}, {kMin, kMax, 65536}));
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor product, Binary(BinaryFn::kMul, a, 65536.0));
  EXPECT_EQ(product, Tensor::I32({3}, {-65536, 0, 0}));
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor quotient, Binary(BinaryFn::kDiv, a, -1.0));
  EXPECT_EQ(quotient, Tensor::I32({3}, {-kMax, kMin, -65536}));
}

TEST(ArithmeticKernelTest, I32DivisionByZeroIsInvalidArgument) {
  const Tensor a = Tensor::I32({3}, {1, 2, 3});
  const Tensor with_zero = Tensor::I32({3}, {1, 0, 1});
  for (const Status& s :
       {Binary(BinaryFn::kDiv, a, with_zero).status(), Binary(BinaryFn::kDiv, a, 0.0).status(),
        Binary(BinaryFn::kDiv, 5.0, with_zero).status()}) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("division by zero"), std::string::npos) << s.ToString();
  }
}

TEST(ArithmeticKernelTest, F32DivisionByZeroFollowsIeee) {
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor out, Binary(BinaryFn::kDiv, Tensor::F32({3}, {1, -1, 0}), 0.0));
  EXPECT_EQ(out.as<float>()[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(out.as<float>()[1], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(out.as<float>()[2]));
}

TEST(ArithmeticKernelTest, I32ScalarMustBeAWholeNumberInRange) {
  const Tensor a = Tensor::I32({2}, {1, 2});
  for (double bad : {2.5, 3e9, -3e9, std::nan(""), std::numeric_limits<double>::infinity()}) {
    EXPECT_EQ(Binary(BinaryFn::kAdd, a, bad).status().code(), Code::kInvalidArgument) << bad;
    EXPECT_EQ(Binary(BinaryFn::kAdd, bad, a).status().code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_THAT(Binary(BinaryFn::kAdd, a, -2147483648.0), IsOk());
  EXPECT_THAT(Binary(BinaryFn::kAdd, a, 2147483647.0), IsOk());
}

TEST(ArithmeticKernelTest, ShapeMismatchIsInvalidArgumentNamingBothShapes) {
  const Status s =
      Binary(BinaryFn::kAdd, Tensor(DType::kF32, {2, 3}), Tensor(DType::kF32, {3, 2})).status();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("f32[2,3]"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("f32[3,2]"), std::string::npos) << s.ToString();
  // Same element count, different shape.
  EXPECT_EQ(
      Binary(BinaryFn::kSub, Tensor(DType::kF32, {6}), Tensor(DType::kF32, {2, 3})).status().code(),
      Code::kInvalidArgument);
}

TEST(ArithmeticKernelTest, DTypeMismatchIsInvalidArgument) {
  const Status s =
      Binary(BinaryFn::kMul, Tensor(DType::kF32, {2}), Tensor(DType::kI32, {2})).status();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("i32[2]"), std::string::npos) << s.ToString();
}

TEST(ArithmeticKernelTest, UnknownOpIsInvalidArgument) {
  const Tensor a = Tensor::I32({2}, {1, 2});
  const auto unknown = static_cast<BinaryFn>(99);
  for (const Status& s : {Binary(unknown, a, a).status(), Binary(unknown, a, 1.0).status(),
                          Binary(unknown, 1.0, a).status()}) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("unknown binary op 99"), std::string::npos) << s.ToString();
  }
}

TEST(ArithmeticKernelTest, MalformedTensorsAreInvalidArgument) {
  const Tensor no_bytes;  // rank 0 claims one element but holds no bytes
  const Tensor unknown_dtype(static_cast<DType>(7), {2});
  const Tensor ok(DType::kF32, {});
  for (const Tensor* bad : {&no_bytes, &unknown_dtype}) {
    EXPECT_EQ(Binary(BinaryFn::kAdd, *bad, *bad).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(Binary(BinaryFn::kAdd, ok, *bad).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(Binary(BinaryFn::kAdd, *bad, 1.0).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(Binary(BinaryFn::kAdd, 1.0, *bad).status().code(), Code::kInvalidArgument);
  }
}

}  // namespace
}  // namespace atl::kernels
