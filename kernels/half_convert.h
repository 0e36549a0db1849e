// Conversions between f32 and the storage dtypes bf16 and f16 over arrays: what every op on
// bf16 or f16 runs before and after computing in f32, and the cast op. At the widest vectors
// the CPU runs, picked once at first use from its flags, as kernels/vector_math.h does:
// AVX-512 (16 lanes), else AVX2 with F16C (8), else SSE2 (4), so one binary built for plain
// x86-64 runs everywhere. f16 goes through the CPU's own conversion instructions where it
// has them (F16C's, AVX-512F's); bf16, which no instruction rounds without flushing
// subnormals (AVX512_BF16's flush them), and f16 on SSE2 are common/base/half.h's bit
// arithmetic, which the compiler vectorizes at each width. Every width rounds to nearest
// even, keeps subnormals, infinities and signed zeros, and gives the bits half.h gives; only
// a NaN's payload may differ (it stays a quiet NaN of its sign). Thread-safe; never throw.
#pragma once

#include <cstdint>
#include <span>

#include "common/base/half.h"

namespace atl::kernels {

// y[i] = x[i] converted, for i < n. The arrays must not overlap.
void WidenBF16(const BF16* x, float* y, int64_t n);
void NarrowToBF16(const float* x, BF16* y, int64_t n);
void WidenF16(const F16* x, float* y, int64_t n);
void NarrowToF16(const float* x, F16* y, int64_t n);

namespace internal {

// One vector width's implementations of the functions above.
struct HalfConvert {
  const char* name;  // "avx512f", "avx2+f16c", "sse2"
  void (*widen_bf16)(const BF16* x, float* y, int64_t n);
  void (*narrow_bf16)(const float* x, BF16* y, int64_t n);
  void (*widen_f16)(const F16* x, float* y, int64_t n);
  void (*narrow_f16)(const float* x, F16* y, int64_t n);
};

// The implementations this CPU can run, widest first; the first is what the functions above
// use. Never empty (SSE2 runs on every x86-64). For tests and benchmarks.
std::span<const HalfConvert* const> SupportedHalfConvert();

// Defined in their own sources, each compiled for its instruction set: call only what
// SupportedHalfConvert lists.
extern const HalfConvert kHalfConvertAvx512;
extern const HalfConvert kHalfConvertAvx2;
extern const HalfConvert kHalfConvertSse2;

}  // namespace internal
}  // namespace atl::kernels
