// The jax.lax primitives' rows of bench/kernels: dot_general batched over heads against
// OpenBLAS's sgemm called once per batch directly.
#include <cblas.h>

#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "bench/kernels/rows.h"
#include "kernels/lax.h"

namespace atl::bench {

Status BenchDotGeneral(int64_t batch, int64_t m, int64_t k, int64_t n, const Sweep& sweep,
                       BenchResult& result) {
  std::mt19937 rng(static_cast<unsigned>(batch * m + k * n));
  const Tensor a = Random(rng, {batch, m, k});
  const Tensor b = Random(rng, {batch, k, n});
  std::vector<float> c(static_cast<size_t>(batch * m * n));
  const kernels::DotDims dims{{2}, {1}, {0}, {0}};
  std::vector<Series> series = {
      {"atoll_dot_general",
       [&]() -> Status {
         ATOLL_ASSIGN_OR_RETURN(Tensor out, kernels::DotGeneral(a, b, dims, DType::kF32));
         Sink(out.as<float>()[0]);
         return Status::Ok();
       }},
      {"openblas_sgemm_per_batch",
       [&]() -> Status {
         for (int64_t p = 0; p < batch; ++p) {
           cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m),
                       static_cast<blasint>(n), static_cast<blasint>(k), 1.0f,
                       a.as<float>().data() + p * m * k, static_cast<blasint>(k),
                       b.as<float>().data() + p * k * n, static_cast<blasint>(n), 0.0f,
                       c.data() + p * m * n, static_cast<blasint>(n));
         }
         Sink(c[0]);
         return Status::Ok();
       }},
  };
  ATOLL_RETURN_IF_ERROR(Measure(series, 2.0 * batch * m * k * n, 1e9, sweep));
  const std::string shape = fmt::format("{}x{}x{}x{}", batch, m, k, n);
  for (Series& s : series) {
    fmt::print("dot_general {} {:>24}: {:8.2f} GFLOP/s (median of {})\n", shape, s.name,
               Median(s.samples), s.samples.size());
    result.Add(s.name, {{"batch", batch}, {"m", m}, {"k", k}, {"n", n}}, "dot_general_gflops",
               "GFLOP/s", s.samples);
  }
  result.Derive(fmt::format("dot_general_ratio_{}", shape),
                Median(series[0].samples) / Median(series[1].samples));
  std::fflush(stdout);
  return Status::Ok();
}

}  // namespace atl::bench
