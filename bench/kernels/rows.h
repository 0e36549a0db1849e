// The rows of bench/kernels, one function per kind (kernels_bench.cc says what each
// measures). Each prints its medians and adds its rows and derived ratios to `result`.
#pragma once

#include <cstdint>
#include <string>

#include "atoll/status.h"
#include "bench/common/bench_result.h"
#include "bench/kernels/measure.h"

namespace atl::bench {

Status BenchMatmul(int64_t n, const Sweep& sweep, BenchResult& result);
// `blas_default`: OpenBLAS's thread count when the process started.
Status BenchDevices(int devices, int64_t n, int blas_default, const Sweep& sweep,
                    BenchResult& result);
Status BenchFused(int64_t elements, const Sweep& sweep, BenchResult& result);
Status BenchTranscendental(int64_t elements, const Sweep& sweep, BenchResult& result);
Status BenchMatmulDTypes(int64_t n, const Sweep& sweep, BenchResult& result);
Status BenchConversions(int64_t elements, const Sweep& sweep, BenchResult& result);
// dot_general [batch,m,k] x [batch,k,n] against one OpenBLAS sgemm per batch.
Status BenchDotGeneral(int64_t batch, int64_t m, int64_t k, int64_t n, const Sweep& sweep,
                       BenchResult& result);
// conv_general_dilated NCHW [batch, channels, size, size] by a 3x3 kernel, SAME, against
// oneDNN called directly.
Status BenchConv2d(int64_t batch, int64_t channels, int64_t size, const Sweep& sweep,
                   BenchResult& result);

// 8 elementwise ops over `elements` floats: the interpreter (which fuses them) against a
// hand-fused loop and against numpy in place, timed by `python` (empty: not measured).
Status BenchChain(int64_t elements, const std::string& python, const Sweep& sweep,
                  BenchResult& result);

}  // namespace atl::bench
