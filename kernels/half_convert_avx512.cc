// kernels/half_convert.h at 16 lanes: built with -mavx512f -mavx512bw, called only on CPUs
// with both.
#include <immintrin.h>

#include "kernels/half_convert.h"
#include "kernels/half_convert_loops.h"

namespace atl::kernels::internal {
namespace {

// The zero-masked forms with every lane set: the plain ones start from
// _mm512_undefined_*(), which GCC 12 warns about (maybe-uninitialized).
struct Lanes {
  static constexpr int64_t kWidth = 16;
  static constexpr __mmask16 kAll = 0xffff;
  static void WidenF16(const F16* x, float* y) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
    _mm512_storeu_ps(y, _mm512_maskz_cvtph_ps(kAll, h));
  }
  static void NarrowToF16(const float* x, F16* y) {
    const __m256i h = _mm512_maskz_cvtps_ph(kAll, _mm512_loadu_ps(x), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), h);
  }
};

}  // namespace

constinit const HalfConvert kHalfConvertAvx512 = {"avx512f", &WidenLoop<Lanes, BF16>,
                                                  &NarrowLoop<Lanes, BF16>, &WidenF16Vectors<Lanes>,
                                                  &NarrowToF16Vectors<Lanes>};

}  // namespace atl::kernels::internal
