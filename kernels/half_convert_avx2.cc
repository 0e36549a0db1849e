// kernels/half_convert.h at 8 lanes: built with -mavx2 -mf16c, called only on CPUs with both.
#include <immintrin.h>

#include "kernels/half_convert.h"
#include "kernels/half_convert_loops.h"

namespace atl::kernels::internal {
namespace {

struct Lanes {
  static constexpr int64_t kWidth = 8;
  static void WidenF16(const F16* x, float* y) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
    _mm256_storeu_ps(y, _mm256_cvtph_ps(h));
  }
  static void NarrowToF16(const float* x, F16* y) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y), h);
  }
};

}  // namespace

constinit const HalfConvert kHalfConvertAvx2 = {"avx2+f16c", &WidenLoop<Lanes, BF16>,
                                                &NarrowLoop<Lanes, BF16>, &WidenF16Vectors<Lanes>,
                                                &NarrowToF16Vectors<Lanes>};

}  // namespace atl::kernels::internal
