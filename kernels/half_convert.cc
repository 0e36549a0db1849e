#include "kernels/half_convert.h"

#include <cpuid.h>

#include <vector>

#include "kernels/half_convert_loops.h"

namespace atl::kernels {
namespace internal {
namespace {

struct Sse2Lanes {};  // SSE2, x86-64's baseline: the loops as the library is built

// F16C (CPUID leaf 1, ECX bit 29), read directly: clang 14's __builtin_cpu_supports does not
// know the name. Its registers are AVX's, whose saving the avx2 check below covers.
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}

std::vector<const HalfConvert*> SupportedConverts() {
  // __builtin_cpu_supports also checks that the kernel saves the registers (XCR0).
  std::vector<const HalfConvert*> found;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) {
    found.push_back(&kHalfConvertAvx512);
  }
  if (__builtin_cpu_supports("avx2") && HasF16c()) {
    found.push_back(&kHalfConvertAvx2);
  }
  found.push_back(&kHalfConvertSse2);
  return found;
}

const HalfConvert& BestConvert() {
  static const HalfConvert& best = *SupportedHalfConvert().front();
  return best;
}

}  // namespace

constinit const HalfConvert kHalfConvertSse2 = {
    "sse2", &WidenLoop<Sse2Lanes, BF16>, &NarrowLoop<Sse2Lanes, BF16>, &WidenLoop<Sse2Lanes, F16>,
    &NarrowLoop<Sse2Lanes, F16>};

std::span<const HalfConvert* const> SupportedHalfConvert() {
  static const std::vector<const HalfConvert*> supported = SupportedConverts();
  return supported;
}

}  // namespace internal

void WidenBF16(const BF16* x, float* y, int64_t n) { internal::BestConvert().widen_bf16(x, y, n); }
void NarrowToBF16(const float* x, BF16* y, int64_t n) {
  internal::BestConvert().narrow_bf16(x, y, n);
}
void WidenF16(const F16* x, float* y, int64_t n) { internal::BestConvert().widen_f16(x, y, n); }
void NarrowToF16(const float* x, F16* y, int64_t n) { internal::BestConvert().narrow_f16(x, y, n); }

}  // namespace atl::kernels
