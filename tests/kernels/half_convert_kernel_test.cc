// kernels/half_convert.h, every width this CPU runs, against references built from the
// formats' definitions: every bf16 and f16 value widens exactly and round-trips, every
// midpoint between two neighbours rounds to the even one (subnormals and the overflow edge
// included), and NaN, infinities and signed zeros keep what they are.
#include "kernels/half_convert.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/base/half.h"

namespace atl::kernels {
namespace {

using internal::HalfConvert;

// An f16's value from its fields, as IEEE 754 binary16 defines it.
double RefF16(uint16_t h) {
  const int sign = h >> 15;
  const int exponent = (h >> 10) & 31;
  const int significand = h & 1023;
  double v = 0;
  if (exponent == 31) {
    v = significand != 0 ? std::numeric_limits<double>::quiet_NaN()
                         : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    v = std::ldexp(significand, -24);
  } else {
    v = std::ldexp(1024 + significand, exponent - 25);
  }
  return sign ? -v : v;
}

// A bf16's value: the top half of an f32, by definition.
double RefBF16(uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); }

std::vector<uint16_t> AllPatterns() {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  return all;
}

bool IsNan(uint16_t h, bool bf16) { return bf16 ? (h & 0x7fff) > 0x7f80 : (h & 0x7fff) > 0x7c00; }

// Every implementation, and the dispatching entry points as "best".
std::vector<HalfConvert> Implementations() {
  std::vector<HalfConvert> all;
  for (const HalfConvert* h : internal::SupportedHalfConvert()) all.push_back(*h);
  all.push_back({"best", &WidenBF16, &NarrowToBF16, &WidenF16, &NarrowToF16});
  return all;
}

class HalfConvertKernelTest : public testing::TestWithParam<HalfConvert> {
 protected:
  // Widens then narrows every pattern of one format through the implementation.
  void CheckEveryValue(bool bf16) {
    const HalfConvert& impl = GetParam();
    const std::vector<uint16_t> bits = AllPatterns();
    std::vector<float> wide(bits.size());
    std::vector<uint16_t> back(bits.size());
    if (bf16) {
      impl.widen_bf16(reinterpret_cast<const BF16*>(bits.data()), wide.data(), 65536);
      impl.narrow_bf16(wide.data(), reinterpret_cast<BF16*>(back.data()), 65536);
    } else {
      impl.widen_f16(reinterpret_cast<const F16*>(bits.data()), wide.data(), 65536);
      impl.narrow_f16(wide.data(), reinterpret_cast<F16*>(back.data()), 65536);
    }
    for (uint32_t i = 0; i < 65536; ++i) {
      const double want = bf16 ? RefBF16(bits[i]) : RefF16(bits[i]);
      SCOPED_TRACE(testing::Message() << std::hex << "0x" << i);
      if (IsNan(bits[i], bf16)) {
        ASSERT_TRUE(std::isnan(wide[i]));
        ASSERT_TRUE(IsNan(back[i], bf16));
        ASSERT_EQ(back[i] >> 15, bits[i] >> 15) << "the sign of a NaN";
        continue;
      }
      ASSERT_EQ(static_cast<double>(wide[i]), want);
      ASSERT_EQ(std::signbit(wide[i]), (bits[i] >> 15) != 0);
      ASSERT_EQ(back[i], bits[i]);
    }
  }

  // Rounds the midpoint between every two neighbouring finite values of one format, and the
  // f32 values just either side of it: to nearest, ties to the even one.
  void CheckMidpoints(bool bf16) {
    const HalfConvert& impl = GetParam();
    std::vector<float> probes;
    std::vector<uint16_t> want;
    const uint16_t max_finite = bf16 ? 0x7f7f : 0x7bff;
    for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
      for (uint16_t h = 0; h <= max_finite; ++h) {
        const uint16_t lo = sign | h;
        const uint16_t hi = sign | (h + 1);  // the next one away from zero (infinity at the end)
        const double a = bf16 ? RefBF16(lo) : RefF16(lo);
        // Past the largest finite value the next step is a whole one further on.
        const double b = h == max_finite ? a + (a - (bf16 ? RefBF16(lo - 1) : RefF16(lo - 1)))
                                         : (bf16 ? RefBF16(hi) : RefF16(hi));
        const auto mid = static_cast<float>((a + b) / 2);  // exact: f32 has the bits
        ASSERT_EQ(static_cast<double>(mid), (a + b) / 2);
        probes.push_back(mid);
        want.push_back((lo & 1) == 0 ? lo : hi);
        probes.push_back(std::nextafter(mid, 0.0f));
        want.push_back(lo);
        probes.push_back(std::nextafter(mid, sign ? -INFINITY : INFINITY));
        want.push_back(hi);
      }
    }
    std::vector<uint16_t> got(probes.size());
    if (bf16) {
      impl.narrow_bf16(probes.data(), reinterpret_cast<BF16*>(got.data()),
                       static_cast<int64_t>(probes.size()));
    } else {
      impl.narrow_f16(probes.data(), reinterpret_cast<F16*>(got.data()),
                      static_cast<int64_t>(probes.size()));
    }
    for (size_t i = 0; i < probes.size(); ++i) {
      ASSERT_EQ(got[i], want[i]) << "narrowing " << probes[i] << std::hexfloat << " (" << probes[i]
                                 << ")";
    }
  }
};

TEST_P(HalfConvertKernelTest, EveryBF16ValueWidensExactlyAndRoundTrips) { CheckEveryValue(true); }
TEST_P(HalfConvertKernelTest, EveryF16ValueWidensExactlyAndRoundTrips) { CheckEveryValue(false); }
TEST_P(HalfConvertKernelTest, BF16RoundsToNearestEvenEverywhere) { CheckMidpoints(true); }
TEST_P(HalfConvertKernelTest, F16RoundsToNearestEvenEverywhere) { CheckMidpoints(false); }

TEST_P(HalfConvertKernelTest, SpecialValuesKeepWhatTheyAre) {
  const HalfConvert& impl = GetParam();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::numeric_limits<float>::denorm_min();
  const std::vector<float> x = {0.0f,  -0.0f,    inf,       -inf,     nan,   -nan,  tiny,
                                -tiny, 65504.0f, 65519.99f, 65520.0f, 1e-8f, 3e-8f, 3.4e38f};
  std::vector<BF16> b(x.size());
  std::vector<F16> h(x.size());
  impl.narrow_bf16(x.data(), b.data(), static_cast<int64_t>(x.size()));
  impl.narrow_f16(x.data(), h.data(), static_cast<int64_t>(x.size()));
  // bf16 has f32's exponent range: an f32 subnormal rounds to a bf16 one (here 0, as it is
  // below half of bf16's smallest); f16 overflows past 65519.99 and flushes nothing.
  const std::vector<uint16_t> want_b = {0x0000, 0x8000, 0x7f80, 0xff80, 0,      0,      0x0000,
                                        0x8000, 0x4780, 0x4780, 0x4780, 0x322c, 0x3301, 0x7f80};
  const std::vector<uint16_t> want_h = {0x0000, 0x8000, 0x7c00, 0xfc00, 0,      0,      0x0000,
                                        0x8000, 0x7bff, 0x7bff, 0x7c00, 0x0000, 0x0001, 0x7c00};
  for (size_t i = 0; i < x.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "x[" << i << "] = " << x[i]);
    if (std::isnan(x[i])) {
      EXPECT_TRUE(IsNan(b[i].bits, true));
      EXPECT_TRUE(IsNan(h[i].bits, false));
      EXPECT_EQ(b[i].bits >> 15, h[i].bits >> 15);
      EXPECT_EQ(b[i].bits >> 15, std::signbit(x[i]) ? 1 : 0);
      continue;
    }
    EXPECT_EQ(b[i].bits, want_b[i]);
    EXPECT_EQ(h[i].bits, want_h[i]);
  }
}

// Random f32 bit patterns of every kind, in arrays of every length up to a few vectors (so
// that each tail path runs): the same bits as the scalar functions of common/base/half.h.
TEST_P(HalfConvertKernelTest, AgreesWithTheScalarConversionsOnAnyLength) {
  const HalfConvert& impl = GetParam();
  std::mt19937 rng(2024);
  std::uniform_int_distribution<uint32_t> any;
  for (int64_t n = 0; n <= 70; ++n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = std::bit_cast<float>(any(rng));
    std::vector<BF16> b(x.size());
    std::vector<F16> h(x.size());
    impl.narrow_bf16(x.data(), b.data(), n);
    impl.narrow_f16(x.data(), h.data(), n);
    std::vector<float> wb(x.size()), wh(x.size());
    impl.widen_bf16(b.data(), wb.data(), n);
    impl.widen_f16(h.data(), wh.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      SCOPED_TRACE(testing::Message() << "n " << n << " element " << i << ": " << x[i]);
      if (std::isnan(x[i])) {
        ASSERT_TRUE(std::isnan(wb[i]) && std::isnan(wh[i]));
        continue;
      }
      ASSERT_EQ(b[i].bits, atl::NarrowToBF16(x[i]).bits);
      ASSERT_EQ(h[i].bits, atl::NarrowToF16(x[i]).bits);
      ASSERT_EQ(std::bit_cast<uint32_t>(wb[i]), std::bit_cast<uint32_t>(Widen(b[i])));
      ASSERT_EQ(std::bit_cast<uint32_t>(wh[i]), std::bit_cast<uint32_t>(Widen(h[i])));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryWidth, HalfConvertKernelTest, testing::ValuesIn(Implementations()),
                         [](const testing::TestParamInfo<HalfConvert>& width) {
                           std::string name = width.param.name;
                           for (char& c : name) {
                             if (c == '+') c = '_';
                           }
                           return name;
                         });

TEST(HalfConvertSupportTest, TheWidestSupportedWidthIsUsed) {
  const auto supported = internal::SupportedHalfConvert();
  ASSERT_FALSE(supported.empty());
  EXPECT_EQ(std::string(supported.back()->name), "sse2");
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) {
    EXPECT_EQ(std::string(supported.front()->name), "avx512f");
  }
}

}  // namespace
}  // namespace atl::kernels
