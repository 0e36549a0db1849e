// exp, log and tanh over f32 arrays, vectorized: the elementwise, softmax and cross-entropy
// kernels call these instead of a loop of libm calls, which the compiler cannot vectorize.
// They are SLEEF's (libsleef 3.5.1) u10 functions at the widest vector width the CPU runs:
// AVX-512F (16 lanes), else AVX2 with FMA (8), else 4 lanes (SSE2, or SSE4.1 or 128-bit AVX2
// where SLEEF finds them). The width is picked once, at first use, from the CPU's flags, so
// one binary built for plain x86-64 runs everywhere. Thread-safe; never throw.
//
// Accuracy: within 1 ulp of the exact result for every f32 input, subnormal inputs and
// results included. Checked over all 2^32 inputs for each width and for SLEEF's SSE2 and
// SSE4.1 forms: at most 0.99 ulp for exp, 1.00000002 for tanh, 0.63 for log (glibc's scalar
// expf, tanhf and logf: 0.50, 2.19 and 0.82); tests/kernels/vector_math_kernel_test.cc
// checks a sweep of the range against 1.0001. Special values are libm's:
// exp(-inf) = 0, exp(+inf) = +inf, exp overflows to +inf above 88.72; log(+-0) = -inf,
// log(x < 0) = nan, log(+inf) = +inf; tanh(+-inf) = +-1, tanh(-0) = -0; nan gives nan.
// The result of an element depends on its value only, not on its place in the array.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

namespace atl::kernels {

// y[i] = f(x[i]) for i < n. `y` may be `x` (in place); the arrays must not otherwise overlap.
void ExpF32(const float* x, float* y, int64_t n);
void LogF32(const float* x, float* y, int64_t n);
void TanhF32(const float* x, float* y, int64_t n);

// The same over f64, with libm one element at a time: f64 is there to check gradients
// against, where accuracy counts and speed does not.
void ExpF64(const double* x, double* y, int64_t n);
void LogF64(const double* x, double* y, int64_t n);
void TanhF64(const double* x, double* y, int64_t n);

// The function for x's element type, for kernels written once for f32 and f64 (in such a
// template, MapThrough<T>(Tanh, ...) picks T's).
inline void Exp(const float* x, float* y, int64_t n) { ExpF32(x, y, n); }
inline void Exp(const double* x, double* y, int64_t n) { ExpF64(x, y, n); }
inline void Log(const float* x, float* y, int64_t n) { LogF32(x, y, n); }
inline void Log(const double* x, double* y, int64_t n) { LogF64(x, y, n); }
inline void Tanh(const float* x, float* y, int64_t n) { TanhF32(x, y, n); }
inline void Tanh(const double* x, double* y, int64_t n) { TanhF64(x, y, n); }

// f composed with plain arithmetic, for i < n: after(i, f(before(i))), where `f` is one of the
// functions above, `before(i)` returns a float and `after(i, float)` stores a result. Runs
// block by block through a small buffer on the stack, so that each of the three loops
// vectorizes. Example, sigmoid:
//   MapThrough(ExpF32, n, [x](int64_t i) { return -x[i]; },
//              [y](int64_t i, float e) { y[i] = 1.0f / (1.0f + e); });
// `f` may be any such function over another element type T (f64's, say).
template <typename T, typename Before, typename After>
void MapThrough(void (*f)(const T*, T*, int64_t), int64_t n, Before before, After after) {
  constexpr int64_t kBlock = 256;
  T t[kBlock];
  for (int64_t base = 0; base < n; base += kBlock) {
    const int64_t len = std::min(kBlock, n - base);
    for (int64_t j = 0; j < len; ++j) t[j] = before(base + j);
    f(t, t, len);
    for (int64_t j = 0; j < len; ++j) after(base + j, t[j]);
  }
}

namespace internal {

// One vector width's implementations of the functions above.
struct VectorMath {
  const char* name;  // "avx512f", "avx2", "sse"
  int lanes;
  void (*exp)(const float* x, float* y, int64_t n);
  void (*log)(const float* x, float* y, int64_t n);
  void (*tanh)(const float* x, float* y, int64_t n);
};

// The implementations this CPU can run, widest first; the first is what ExpF32, LogF32 and
// TanhF32 use. Never empty (4 lanes run on every x86-64). For tests and benchmarks.
std::span<const VectorMath* const> SupportedVectorMath();

// Defined in their own sources, each compiled for its instruction set: call only what
// SupportedVectorMath lists.
extern const VectorMath kVectorMathAvx512;
extern const VectorMath kVectorMathAvx2;
extern const VectorMath kVectorMathSse;

}  // namespace internal
}  // namespace atl::kernels
