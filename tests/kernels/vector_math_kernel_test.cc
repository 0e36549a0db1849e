// kernels/vector_math.h at every vector width this CPU runs: within the stated 1 ulp of the
// exact result (a double-precision libm call, rounded) over a sweep of the whole f32 range,
// libm's special values exactly, any length, in place, and the widest width chosen.
#include "kernels/vector_math.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace atl::kernels {
namespace {

using internal::SupportedVectorMath;
using internal::VectorMath;

// 1 ulp, and a little room for tanh (1.00000002 at worst over all 2^32 inputs).
constexpr double kMaxUlps = 1.0001;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kMin = std::numeric_limits<float>::min();          // smallest normal
constexpr float kTiny = std::numeric_limits<float>::denorm_min();  // smallest subnormal
constexpr float kMax = std::numeric_limits<float>::max();

struct Function {
  const char* name;
  void (*VectorMath::*of)(const float*, float*, int64_t);
  double (*exact)(double);
};
const Function kFunctions[] = {
    {"exp", &VectorMath::exp, [](double x) { return std::exp(x); }},
    {"log", &VectorMath::log, [](double x) { return std::log(x); }},
    {"tanh", &VectorMath::tanh, [](double x) { return std::tanh(x); }},
};

std::string Hex(float v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%a", static_cast<double>(v));
  return text;
}

// The distance of `got` from `exact` in units of the last place of `exact` rounded to f32
// (2^-149 for subnormal results), or 0 when both are the same special value. Infinity when
// a NaN, an infinity or the sign of a zero differs.
double UlpError(float got, double exact) {
  const auto rounded = static_cast<float>(exact);
  if (std::isnan(exact) || std::isnan(got)) {
    return std::isnan(exact) && std::isnan(got) ? 0 : INFINITY;
  }
  if (std::isinf(rounded) || std::isinf(got)) return rounded == got ? 0 : INFINITY;
  if (rounded == 0 && got == 0) return std::signbit(rounded) == std::signbit(got) ? 0 : INFINITY;
  const float magnitude = std::fabs(rounded);
  const double ulp = static_cast<double>(std::nextafter(magnitude, kInf)) - magnitude;
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

// Values every function must get right, and every 8191st f32 bit pattern: both signs,
// subnormals, NaNs and infinities, and every binade in between.
std::vector<float> WideRange() {
  std::vector<float> x = {0.0f,   -0.0f,  kInf,    -kInf,   kNan,    -kNan, 1.0f,   -1.0f,
                          kMin,   -kMin,  kTiny,   -kTiny,  kMax,    -kMax, 1e-30f, -1e-30f,
                          88.72f, 88.73f, -87.33f, -103.9f, -104.0f, 9.0f,  -9.0f,  0.5f};
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 8191) {
    const auto b = static_cast<uint32_t>(bits);
    float v;
    std::memcpy(&v, &b, sizeof(v));
    x.push_back(v);
  }
  return x;
}

TEST(VectorMathKernelTest, EveryWidthIsWithinOneUlpOverTheWholeRange) {
  const std::vector<float> x = WideRange();
  std::vector<float> y(x.size());
  for (const VectorMath* width : SupportedVectorMath()) {
    for (const Function& f : kFunctions) {
      (width->*f.of)(x.data(), y.data(), static_cast<int64_t>(x.size()));
      double worst = 0;
      size_t at = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double error = UlpError(y[i], f.exact(x[i]));
        if (error > worst) {
          worst = error;
          at = i;
        }
      }
      EXPECT_LE(worst, kMaxUlps) << width->name << " " << f.name << "(" << Hex(x[at])
                                 << ") = " << Hex(y[at]) << ", exactly " << f.exact(x[at]);
    }
  }
}

TEST(VectorMathKernelTest, SpecialValuesAreLibms) {
  struct Case {
    void (*VectorMath::*of)(const float*, float*, int64_t);
    float x;
    float y;
  };
  const Case cases[] = {
      {&VectorMath::exp, 0.0f, 1.0f},   {&VectorMath::exp, -0.0f, 1.0f},
      {&VectorMath::exp, -kInf, 0.0f},  {&VectorMath::exp, kInf, kInf},
      {&VectorMath::exp, 89.0f, kInf},  {&VectorMath::exp, -105.0f, 0.0f},
      {&VectorMath::log, 0.0f, -kInf},  {&VectorMath::log, -0.0f, -kInf},
      {&VectorMath::log, 1.0f, 0.0f},   {&VectorMath::log, kInf, kInf},
      {&VectorMath::tanh, 0.0f, 0.0f},  {&VectorMath::tanh, -0.0f, -0.0f},
      {&VectorMath::tanh, kInf, 1.0f},  {&VectorMath::tanh, -kInf, -1.0f},
      {&VectorMath::tanh, 20.0f, 1.0f}, {&VectorMath::tanh, 1e-30f, 1e-30f},
  };
  const float nans[] = {-1.0f, -kInf, kNan};  // log's; the others' only for NaN
  for (const VectorMath* width : SupportedVectorMath()) {
    SCOPED_TRACE(width->name);
    for (const Case& c : cases) {
      float y = kNan;
      (width->*c.of)(&c.x, &y, 1);
      EXPECT_EQ(y, c.y) << Hex(c.x);
      EXPECT_EQ(std::signbit(y), std::signbit(c.y)) << Hex(c.x);
    }
    for (float x : nans) {
      float y = 0;
      width->log(&x, &y, 1);
      EXPECT_TRUE(std::isnan(y)) << "log(" << x << ")";
    }
    for (const Function& f : kFunctions) {
      float y = 0;
      (width->*f.of)(&kNan, &y, 1);
      EXPECT_TRUE(std::isnan(y)) << f.name << "(nan)";
    }
  }
}

// Every length around the vector widths, out of place and in place: each element is what
// the function gives that value alone, wherever it sits (the padded last vector included).
TEST(VectorMathKernelTest, AnyLengthInPlaceOrNotGivesEachElementItsOwnResult) {
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.37f * static_cast<float>(i % 53) - 5.0f;
  for (const VectorMath* width : SupportedVectorMath()) {
    for (const Function& f : kFunctions) {
      std::vector<float> alone(x.size());
      for (size_t i = 0; i < x.size(); ++i) (width->*f.of)(&x[i], &alone[i], 1);
      for (int64_t n : {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 1000}) {
        SCOPED_TRACE(testing::Message() << width->name << " " << f.name << " n=" << n);
        std::vector<float> out(x.size() + 1, -7.0f);  // one past n stays untouched
        (width->*f.of)(x.data(), out.data(), n);
        std::vector<float> in_place(x.begin(), x.end());
        (width->*f.of)(in_place.data(), in_place.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          // Compared as bits: NaN (log of a negative) equals itself.
          ASSERT_EQ(std::memcmp(&out[i], &alone[i], sizeof(float)), 0) << "element " << i;
          ASSERT_EQ(std::memcmp(&in_place[i], &alone[i], sizeof(float)), 0) << "element " << i;
        }
        EXPECT_EQ(out[n], -7.0f);
        if (n < static_cast<int64_t>(x.size())) {
          EXPECT_EQ(in_place[n], x[n]);
        }
      }
    }
  }
}

TEST(VectorMathKernelTest, TheWidestSupportedWidthIsUsed) {
  const auto widths = SupportedVectorMath();
  ASSERT_FALSE(widths.empty());
  EXPECT_STREQ(widths.back()->name, "sse");  // every x86-64 has it
  for (size_t i = 1; i < widths.size(); ++i) EXPECT_GT(widths[i - 1]->lanes, widths[i]->lanes);
  std::string names;
  for (const VectorMath* width : widths) names += std::string(" ") + width->name;
  RecordProperty("vector_math_widths", names);
  std::vector<float> x(100);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i) - 3.0f;
  std::vector<float> got(x.size()), want(x.size());
  ExpF32(x.data(), got.data(), 100);
  widths.front()->exp(x.data(), want.data(), 100);
  EXPECT_EQ(got, want);
  LogF32(x.data() + 31, got.data(), 69);
  widths.front()->log(x.data() + 31, want.data(), 69);
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + 69),
            std::vector<float>(want.begin(), want.begin() + 69));
  TanhF32(x.data(), got.data(), 100);
  widths.front()->tanh(x.data(), want.data(), 100);
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace atl::kernels
