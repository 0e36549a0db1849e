// The loops every width of kernels/half_convert.h runs. Internal to the kernel library,
// included only by the per-width sources, each compiled with its own instruction-set flags.
// `Lanes` is declared in an unnamed namespace there, so each source's instantiations are its
// own (as in kernels/vector_math_map.h): the linker can never pick an AVX-512 copy of these
// loops for a call on a CPU without AVX-512.
#pragma once

#include <cstdint>

#include "common/base/half.h"

namespace atl::kernels::internal {

// half.h's scalar conversions in plain loops, which the compiler vectorizes at the width the
// source is built for.
template <typename Lanes, typename H>
void WidenLoop(const H* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Widen(x[i]);
}
template <typename Lanes, typename H>
void NarrowLoop(const float* x, H* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Narrow<H>(x[i]);
}

// f16 through the CPU's conversion instructions, whole vectors at a time: Lanes gives
// kWidth, WidenF16(const F16*, float*) and NarrowToF16(const float*, F16*) over one vector;
// the last few elements take the scalar loops.
template <typename Lanes>
void WidenF16Vectors(const F16* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + Lanes::kWidth <= n; i += Lanes::kWidth) Lanes::WidenF16(x + i, y + i);
  WidenLoop<Lanes>(x + i, y + i, n - i);
}
template <typename Lanes>
void NarrowToF16Vectors(const float* x, F16* y, int64_t n) {
  int64_t i = 0;
  for (; i + Lanes::kWidth <= n; i += Lanes::kWidth) Lanes::NarrowToF16(x + i, y + i);
  NarrowLoop<Lanes>(x + i, y + i, n - i);
}

}  // namespace atl::kernels::internal
