// The loop every vector width of kernels/vector_math.h runs: f over whole vectors, then the
// last few elements through one padded vector. Internal to the kernel library, included only
// by the per-width sources, each compiled with its own instruction-set flags. `Lanes` is
// declared in an unnamed namespace there, so each source's instantiations are its own: the
// linker can never pick an AVX-512 copy of this loop for a call on a CPU without AVX-512.
#pragma once

#include <cstdint>

namespace atl::kernels::internal {

// y[i] = F(x[i]) for i < n, with `Lanes` giving the vector type (Lanes::Vec), its width
// (Lanes::kWidth) and unaligned Load and Store. `y` may be `x`.
template <typename Lanes, auto F>
void MapLanes(const float* x, float* y, int64_t n) {
  constexpr int64_t w = Lanes::kWidth;
  int64_t i = 0;
  for (; i + w <= n; i += w) Lanes::Store(y + i, F(Lanes::Load(x + i)));
  if (i == n) return;
  // The padding is 1: a value every function takes without a special case.
  float tail[w];
  for (int64_t j = 0; j < w; ++j) tail[j] = i + j < n ? x[i + j] : 1.0f;
  Lanes::Store(tail, F(Lanes::Load(tail)));
  for (int64_t j = 0; i + j < n; ++j) y[i + j] = tail[j];
}

}  // namespace atl::kernels::internal
