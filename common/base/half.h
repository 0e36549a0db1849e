// The elements of the storage dtypes bf16 and f16 and their conversions to and from f32, in
// branch-free bit arithmetic so that a loop of them vectorizes (kernels/half_convert.h runs
// such loops at the CPU's widest vectors). Narrowing rounds to nearest, ties to even;
// subnormals are exact both ways (never flushed), infinities and signed zeros are kept, and
// a NaN stays a quiet NaN of its sign (bf16 keeps its top payload bits, f16 becomes 0x7e00).
// Widening is exact. Both rely on the default floating-point environment (round to
// nearest, no flush to zero), as all of atoll's arithmetic does. Always inlined: sources
// built for wider vectors than the rest (kernels/half_convert_*.cc) use them, and an
// out-of-line copy from one of those must never be what the linker gives everyone else.
// Thread-safe.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace atl {

struct BF16 {
  uint16_t bits = 0;
};
struct F16 {
  uint16_t bits = 0;
};

[[gnu::always_inline]] inline float Widen(BF16 h) {
  return std::bit_cast<float>(uint32_t{h.bits} << 16);
}

[[gnu::always_inline]] inline BF16 NarrowToBF16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  // Adding 0x7fff plus the kept half's lowest bit, then truncating, rounds to nearest even;
  // a carry into the exponent is right too (the largest values round up to infinity).
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const bool nan = (x & 0x7fffffffu) > 0x7f800000u;
  return {static_cast<uint16_t>(nan ? (x >> 16) | 0x40u : rounded)};
}

// After Marat Dukhan's FP16 library (MIT): the exponent is moved into f32's place and
// rebiased by a multiply, so that f32's own arithmetic handles every case.
[[gnu::always_inline]] inline float Widen(F16 h) {
  const uint32_t w = uint32_t{h.bits} << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;  // the magnitude, shifted to the top
  // A normal number, infinity or NaN: exponent and significand in f32's places, with the
  // exponent 224 too high, which the multiply by 2^-112 takes back to f16's bias of 15.
  const float normal = std::bit_cast<float>((two_w >> 4) + (0xe0u << 23)) * 0x1.0p-112f;
  // A subnormal: its significand as the low bits of 0.5's, minus 0.5.
  const float subnormal = std::bit_cast<float>((two_w >> 17) | (126u << 23)) - 0.5f;
  const bool is_subnormal = two_w < (1u << 27);
  return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(is_subnormal ? subnormal : normal));
}

[[gnu::always_inline]] inline F16 NarrowToF16(float f) {
  // |f| scaled up and down again so that f32's own rounding leaves f16's precision (and
  // overflows to infinity where f16 would), then the rounded bits are read off.
  const uint32_t w = std::bit_cast<uint32_t>(f);
  float base = (std::bit_cast<float>(w & 0x7fffffffu) * 0x1.0p+112f) * 0x1.0p-110f;
  const uint32_t shl1_w = w + w;  // the magnitude, shifted to the top
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xff000000u;
  bias = bias < 0x71000000u ? 0x71000000u : bias;  // f16's subnormals share one scale
  base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = std::bit_cast<uint32_t>(base);
  const uint32_t nonsign = ((bits >> 13) & 0x7c00u) + (bits & 0x0fffu);
  const bool nan = shl1_w > 0xff000000u;
  return {static_cast<uint16_t>((sign >> 16) | (nan ? 0x7e00u : nonsign))};
}

// For code over both: true for BF16 and F16, and the narrowing to either by its type.
template <typename T>
inline constexpr bool kIsHalf = std::is_same_v<T, BF16> || std::is_same_v<T, F16>;
template <typename H>
[[gnu::always_inline]] inline H Narrow(float f) {
  if constexpr (std::is_same_v<H, BF16>) {
    return NarrowToBF16(f);
  } else {
    return NarrowToF16(f);
  }
}

// The f32 nearest `v` toward zero, with its lowest bit set when that is inexact ("round to
// odd"): rounding it to bf16 or f16, whose significands are much shorter than f32's, gives
// what rounding `v` straight there gives, which rounding to the nearest f32 first would not
// always (double rounding). For double, int32_t and int64_t values.
template <typename T>
float RoundToOddF32(T v) {
  float f = static_cast<float>(v);  // to nearest
  if (std::isnan(f)) return f;
  bool exact = false;
  bool away = false;  // |f| > |v|
  if constexpr (std::is_floating_point_v<T>) {
    exact = static_cast<double>(f) == static_cast<double>(v);
    away = std::fabs(static_cast<double>(f)) > std::fabs(static_cast<double>(v));
  } else if (f >= 0x1p63f) {  // only int64's largest values round up to 2^63
    away = true;
  } else {
    const auto back = static_cast<int64_t>(f);  // f is a whole number in int64's range
    exact = back == static_cast<int64_t>(v);
    away = v > 0 ? back > v : back < v;
  }
  if (exact) return f;
  if (away) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}

}  // namespace atl
