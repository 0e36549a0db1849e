// bench/kernels: what the cpu kernel library (kernels/) costs over the code it wraps or
// replaced, each pair measured on the same buffers, alternating within every repetition so
// that noise from other work on the machine hits both series:
//   matmul  n x n x n, GFLOP/s (2 n^3 flops):
//             atoll        kernels::Matmul through Tensor (validation, a new zero-filled
//                          output tensor, then cblas_sgemm)
//             openblas     cblas_sgemm called directly into a preallocated output
//   devices D threads (D = 1, 2, 4: a host's devices), each multiplying n x n x n at once,
//           GFLOP/s summed over them (2 n^3 D flops per round):
//             per_device        OpenBLAS single-threaded and each thread its share of the
//                               cores, max(1, cores / D), as an executor runs them
//                               (kernels/matmul_threads.h)
//             openblas_default  every call threaded by OpenBLAS itself, over all its threads
//   fused   relu(a * b + c) * 0.5 over `elements` floats, GFLOP/s (4 flops per element):
//             atoll_fused  kernels::EvalFused of that expression (a new output tensor; the
//                          steps run block by block, no intermediate tensors)
//             direct_loop  the same formula as one hand-written loop, compiled with the same
//                          flags, into a preallocated output
//   op      exp, tanh, log, gelu and softmax (rows of 1024) over `elements` floats,
//           elements/s:
//             atoll        the kernel (kernels::Unary, kernels::Softmax), vectorized through
//                          kernels/vector_math.h
//             libm_loop    the kernel as it was: a new output tensor, one libm call per element
//   dtype matmul  n x n x n through the cpu backend (compute::RunCpuOp), GFLOP/s:
//             f32, bf16, f16, f64  the matmul op in that dtype (bf16 and f16: operands widened
//                                  to f32, sgemm, the result rounded once; f64: dgemm)
//   convert  f32 <-> bf16 and f16 over `elements` values at each vector width this CPU runs
//           (kernels/half_convert.h), elements/s:
//             narrow_bf16_W, widen_bf16_W, narrow_f16_W, widen_f16_W  the conversion at width W
//             copy         memcpy of the same f32 values, the bandwidth bound
// Derived, medians over medians (1 means equal): matmul_ratio_n_N = atoll / openblas,
// devices_ratio_n_N_devices_D = per_device / openblas_default, fused_ratio_elements_E =
// atoll_fused / direct_loop, OP_ratio_elements_E = atoll / libm_loop,
// D_matmul_ratio_n_N = dtype D / f32 (D = bf16, f16, f64), CONVERSION_ratio_elements_E =
// that conversion / copy, dot_general_ratio_BxMxKxN = atoll_dot_general /
// openblas_sgemm_per_batch, chain_over_hand_fused_elements_E and chain_over_numpy_elements_E
// (bench/kernels/chain_rows.cc).
#include <cblas.h>

#include <fmt/format.h>

#include "bench/common/bench_args.h"
#include "bench/common/bench_result.h"
#include "bench/kernels/rows.h"
#include "kernels/half_convert.h"
#include "kernels/matmul_threads.h"
#include "kernels/vector_math.h"

namespace atl::bench {
namespace {

Status RunSweep(const BenchOptions& options, BenchResult& result) {
  const Sweep sweep =
      options.quick
          ? Sweep{{64, 256, 512}, {256, 512}, {65536, 1 << 20}, 3, 0.05}
          : Sweep{{64, 256, 512, 1024}, {256, 512, 1024}, {4096, 65536, 1 << 20, 1 << 22}, 7, 0.25};
  const int blas_default = kernels::BlasThreads();
  fmt::print("openblas threads: {}, cores: {}, vector math: {}\n", blas_default,
             kernels::AvailableCores(), kernels::internal::SupportedVectorMath().front()->name);
  fmt::print("bf16/f16 conversions: {}\n", kernels::internal::SupportedHalfConvert().front()->name);
  for (int64_t n : sweep.matmul_n) ATOLL_RETURN_IF_ERROR(BenchMatmul(n, sweep, result));
  for (int64_t n : sweep.matmul_n) ATOLL_RETURN_IF_ERROR(BenchMatmulDTypes(n, sweep, result));
  for (int64_t n : sweep.device_n) {
    for (int devices : {1, 2, 4}) {
      ATOLL_RETURN_IF_ERROR(BenchDevices(devices, n, blas_default, sweep, result));
    }
  }
  for (int64_t e : sweep.fused_elements) ATOLL_RETURN_IF_ERROR(BenchFused(e, sweep, result));
  for (int64_t e : sweep.fused_elements) {
    ATOLL_RETURN_IF_ERROR(BenchTranscendental(e, sweep, result));
  }
  for (int64_t e : sweep.fused_elements) ATOLL_RETURN_IF_ERROR(BenchConversions(e, sweep, result));
  // Attention's scores: 16 heads of [128, 64] x [64, 128].
  ATOLL_RETURN_IF_ERROR(BenchDotGeneral(16, 128, 64, 128, sweep, result));
  ATOLL_RETURN_IF_ERROR(BenchConv2d(8, 64, 56, sweep, result));
  ATOLL_RETURN_IF_ERROR(BenchChain(1 << 20, ATOLL_BENCH_PYTHON, sweep, result));
  return Status::Ok();
}

}  // namespace
}  // namespace atl::bench

int main(int argc, char** argv) {
  return atl::bench::RunBenchmark(argc, argv, "kernels",
                                  "cpu kernel library against OpenBLAS, a hand-written loop, "
                                  "scalar libm loops, f32 matmuls and memcpy",
                                  atl::bench::RunSweep);
}
