// kernels/vector_math.h at 16 lanes: built with -mavx512f, called only on CPUs with it.
#include <immintrin.h>
#include <sleef.h>

#include "kernels/vector_math.h"
#include "kernels/vector_math_map.h"

namespace atl::kernels::internal {
namespace {

struct Lanes {
  using Vec = __m512;
  static constexpr int kWidth = 16;
  static Vec Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
};

}  // namespace

constinit const VectorMath kVectorMathAvx512 = {
    "avx512f", Lanes::kWidth, &MapLanes<Lanes, Sleef_expf16_u10avx512f>,
    &MapLanes<Lanes, Sleef_logf16_u10avx512f>, &MapLanes<Lanes, Sleef_tanhf16_u10avx512f>};

}  // namespace atl::kernels::internal
