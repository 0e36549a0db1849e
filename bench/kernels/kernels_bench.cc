// bench/kernels: what the cpu kernel library (kernels/) costs over the code it wraps, each
// pair measured on the same buffers, alternating within every repetition so that noise from
// other work on the machine hits both series:
//   matmul  n x n x n, GFLOP/s (2 n^3 flops):
//             atoll        kernels::Matmul through Tensor (validation, a new zero-filled
//                          output tensor, then cblas_sgemm)
//             openblas     cblas_sgemm called directly into a preallocated output
//   fused   relu(a * b + c) * 0.5 over `elements` floats, GFLOP/s (4 flops per element):
//             atoll_fused  kernels::EvalFused of that expression (a new output tensor; the
//                          steps run block by block, no intermediate tensors)
//             direct_loop  the same formula as one hand-written loop, compiled with the same
//                          flags, into a preallocated output
// Derived: matmul_ratio_n_N = atoll / openblas and fused_ratio_elements_E = atoll_fused /
// direct_loop (medians; 1 means no overhead). OpenBLAS runs with its default thread count.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "bench/common/bench_args.h"
#include "bench/common/bench_result.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"

namespace atl::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Sweep {
  std::vector<int64_t> matmul_n;
  std::vector<int64_t> fused_elements;
  int runs;
  double sample_s;  // the least time one sample runs for (whole iterations)
};

// Results kept alive so that the compiler cannot drop the work.
volatile float g_sink = 0;

Tensor Random(std::mt19937& rng, Shape shape) {
  Tensor t(DType::kF32, std::move(shape));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : t.as<float>()) v = dist(rng);
  return t;
}

// One measured series: `run` does one iteration and returns its error, if any.
struct Series {
  Series(std::string series_name, std::function<Status()> body)
      : name(std::move(series_name)), run(std::move(body)) {}

  std::string name;
  std::function<Status()> run;
  int64_t iterations = 1;  // per sample, from calibration
  std::vector<double> samples;
};

// Iterations that take at least `seconds` (after one warm-up call).
Result<int64_t> Calibrate(Series& s, double seconds) {
  ATOLL_RETURN_IF_ERROR(s.run());
  int64_t iterations = 1;
  for (;;) {
    const auto start = Clock::now();
    for (int64_t i = 0; i < iterations; ++i) ATOLL_RETURN_IF_ERROR(s.run());
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (elapsed >= seconds) return iterations;
    iterations =
        elapsed <= 0
            ? iterations * 10
            : std::max(iterations + 1, static_cast<int64_t>(iterations * seconds / elapsed * 1.1));
  }
}

// `runs` samples of every series in GFLOP/s (`flops` per iteration), the series alternating
// within each repetition (and their order reversed every other one).
Status Measure(std::vector<Series>& series, double flops, const Sweep& sweep) {
  for (Series& s : series) {
    ATOLL_ASSIGN_OR_RETURN(s.iterations, Calibrate(s, sweep.sample_s));
  }
  for (int r = 0; r < sweep.runs; ++r) {
    for (size_t j = 0; j < series.size(); ++j) {
      Series& s = series[r % 2 == 0 ? j : series.size() - 1 - j];
      const auto start = Clock::now();
      for (int64_t i = 0; i < s.iterations; ++i) ATOLL_RETURN_IF_ERROR(s.run());
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      s.samples.push_back(flops * static_cast<double>(s.iterations) / elapsed / 1e9);
    }
  }
  return Status::Ok();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

Status BenchMatmul(int64_t n, const Sweep& sweep, BenchResult& result) {
  std::mt19937 rng(static_cast<unsigned>(n));
  const Tensor a = Random(rng, {n, n});
  const Tensor b = Random(rng, {n, n});
  std::vector<float> c(static_cast<size_t>(n * n));
  const auto bn = static_cast<blasint>(n);
  std::vector<Series> series = {
      {"atoll",
       [&]() -> Status {
         ATOLL_ASSIGN_OR_RETURN(Tensor out, kernels::Matmul(a, b, {}));
         g_sink = g_sink + out.as<float>()[0];
         return Status::Ok();
       }},
      {"openblas",
       [&]() -> Status {
         cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bn, bn, bn, 1.0f,
                     a.as<float>().data(), bn, b.as<float>().data(), bn, 0.0f, c.data(), bn);
         g_sink = g_sink + c[0];
         return Status::Ok();
       }},
  };
  ATOLL_RETURN_IF_ERROR(Measure(series, 2.0 * n * n * n, sweep));
  for (Series& s : series) {
    fmt::print("matmul n={:>5} {:>9}: {:8.2f} GFLOP/s (median of {})\n", n, s.name,
               Median(s.samples), s.samples.size());
    result.Add(s.name, {{"n", n}}, "matmul_gflops", "GFLOP/s", s.samples);
  }
  result.Derive(fmt::format("matmul_ratio_n_{}", n),
                Median(series[0].samples) / Median(series[1].samples));
  std::fflush(stdout);
  return Status::Ok();
}

// relu(a * b + c) * 0.5, written out by hand.
void DirectLoop(const float* a, const float* b, const float* c, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = a[i] * b[i] + c[i];
    // max(v * 0.5, 0) is relu(v) * 0.5 exactly; written this way GCC does not fold the
    // multiply into a branch, so the loop vectorizes.
    out[i] = std::max(v * 0.5f, 0.0f);
  }
}

Status BenchFused(int64_t elements, const Sweep& sweep, BenchResult& result) {
  std::mt19937 rng(static_cast<unsigned>(elements));
  std::vector<Tensor> inputs = {Random(rng, {elements}), Random(rng, {elements}),
                                Random(rng, {elements})};
  kernels::FusedExpr expr;
  const kernels::FusedValue lin =
      expr.Apply(kernels::BinaryFn::kAdd,
                 expr.Apply(kernels::BinaryFn::kMul, expr.Input(0), expr.Input(1)), expr.Input(2));
  expr.Apply(kernels::BinaryFn::kMul, expr.Apply(kernels::UnaryFn::kRelu, lin),
             expr.Constant(0.5f));
  std::vector<float> out(static_cast<size_t>(elements));
  std::vector<Series> series = {
      {"atoll_fused",
       [&]() -> Status {
         ATOLL_ASSIGN_OR_RETURN(Tensor y, kernels::EvalFused(expr, inputs));
         g_sink = g_sink + y.as<float>()[elements - 1];
         return Status::Ok();
       }},
      {"direct_loop",
       [&]() -> Status {
         DirectLoop(inputs[0].as<float>().data(), inputs[1].as<float>().data(),
                    inputs[2].as<float>().data(), out.data(), elements);
         g_sink = g_sink + out[elements - 1];
         return Status::Ok();
       }},
  };
  ATOLL_RETURN_IF_ERROR(Measure(series, 4.0 * static_cast<double>(elements), sweep));
  for (Series& s : series) {
    fmt::print("fused elements={:>8} {:>11}: {:8.2f} GFLOP/s (median of {})\n", elements, s.name,
               Median(s.samples), s.samples.size());
    result.Add(s.name, {{"elements", elements}}, "fused_gflops", "GFLOP/s", s.samples);
  }
  result.Derive(fmt::format("fused_ratio_elements_{}", elements),
                Median(series[0].samples) / Median(series[1].samples));
  std::fflush(stdout);
  return Status::Ok();
}

Status RunSweep(const BenchOptions& options, BenchResult& result) {
  const Sweep sweep = options.quick
                          ? Sweep{{64, 256, 512}, {65536, 1 << 20}, 3, 0.05}
                          : Sweep{{64, 256, 512, 1024}, {4096, 65536, 1 << 20, 1 << 22}, 7, 0.25};
  fmt::print("openblas threads: {}\n", openblas_get_num_threads());
  for (int64_t n : sweep.matmul_n) ATOLL_RETURN_IF_ERROR(BenchMatmul(n, sweep, result));
  for (int64_t e : sweep.fused_elements) ATOLL_RETURN_IF_ERROR(BenchFused(e, sweep, result));
  return Status::Ok();
}

}  // namespace
}  // namespace atl::bench

int main(int argc, char** argv) {
  return atl::bench::RunBenchmark(argc, argv, "kernels",
                                  "cpu kernel library against OpenBLAS and a hand-written loop "
                                  "(GFLOP/s)",
                                  atl::bench::RunSweep);
}
