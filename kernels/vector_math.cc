#include "kernels/vector_math.h"

#include <immintrin.h>
#include <sleef.h>

#include <cmath>
#include <vector>

#include "kernels/vector_math_map.h"

namespace atl::kernels {
namespace internal {
namespace {

// 4 lanes, x86-64's baseline: SLEEF's dispatching entry points, which take SSE4.1 or 128-bit
// AVX2 code themselves where the CPU has it.
struct Lanes {
  using Vec = __m128;
  static constexpr int kWidth = 4;
  static Vec Load(const float* p) { return _mm_loadu_ps(p); }
  static void Store(float* p, Vec v) { _mm_storeu_ps(p, v); }
};

std::vector<const VectorMath*> Supported() {
  // __builtin_cpu_supports also checks that the kernel saves the registers (XCR0).
  std::vector<const VectorMath*> found;
  if (__builtin_cpu_supports("avx512f")) found.push_back(&kVectorMathAvx512);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    found.push_back(&kVectorMathAvx2);
  }
  found.push_back(&kVectorMathSse);
  return found;
}

const VectorMath& Best() {
  static const VectorMath& best = *SupportedVectorMath().front();
  return best;
}

}  // namespace

constinit const VectorMath kVectorMathSse = {
    "sse", Lanes::kWidth, &MapLanes<Lanes, Sleef_expf4_u10>, &MapLanes<Lanes, Sleef_logf4_u10>,
    &MapLanes<Lanes, Sleef_tanhf4_u10>};

std::span<const VectorMath* const> SupportedVectorMath() {
  static const std::vector<const VectorMath*> supported = Supported();
  return supported;
}

}  // namespace internal

void ExpF32(const float* x, float* y, int64_t n) { internal::Best().exp(x, y, n); }
void LogF32(const float* x, float* y, int64_t n) { internal::Best().log(x, y, n); }
void TanhF32(const float* x, float* y, int64_t n) { internal::Best().tanh(x, y, n); }

void ExpF64(const double* x, double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}
void LogF64(const double* x, double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::log(x[i]);
}
void TanhF64(const double* x, double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}

}  // namespace atl::kernels
