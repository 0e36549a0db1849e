// kernels/vector_math.h at 8 lanes: built with -mavx2 -mfma, called only on CPUs with both.
#include <immintrin.h>
#include <sleef.h>

#include "kernels/vector_math.h"
#include "kernels/vector_math_map.h"

namespace atl::kernels::internal {
namespace {

struct Lanes {
  using Vec = __m256;
  static constexpr int kWidth = 8;
  static Vec Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
};

}  // namespace

constinit const VectorMath kVectorMathAvx2 = {
    "avx2", Lanes::kWidth, &MapLanes<Lanes, Sleef_expf8_u10avx2>,
    &MapLanes<Lanes, Sleef_logf8_u10avx2>, &MapLanes<Lanes, Sleef_tanhf8_u10avx2>};

}  // namespace atl::kernels::internal
