// The matmul rows of bench/kernels: one matmul against OpenBLAS called directly, and D
// device threads multiplying at once with their share of the cores against OpenBLAS's
// default threads.
#include <cblas.h>

#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "bench/kernels/rows.h"
#include "kernels/matmul.h"
#include "kernels/matmul_threads.h"
#include "kernels/thread_team.h"

namespace atl::bench {

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
         Sink(out.as<float>()[0]);
         return Status::Ok();
       }},
      {"openblas",
       [&]() -> Status {
         cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bn, bn, bn, 1.0f,
                     a.as<float>().data(), bn, b.as<float>().data(), bn, 0.0f, c.data(), bn);
         Sink(c[0]);
         return Status::Ok();
       }},
  };
  ATOLL_RETURN_IF_ERROR(Measure(series, 2.0 * n * n * n, 1e9, sweep));
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

Status BenchDevices(int devices, int64_t n, int blas_default, const Sweep& sweep,
                    BenchResult& result) {
  std::mt19937 rng(static_cast<unsigned>(n + devices));
  const Tensor a = Random(rng, {n, n});
  const Tensor b = Random(rng, {n, n});
  const int share = kernels::CoresPerDevice(kernels::AvailableCores(), devices);
  // The device threads: this one and devices - 1 others, each keeping its own matmul
  // helpers from round to round, as a device stream's thread does.
  kernels::internal::ThreadTeam team(devices - 1);
  // One round: every device multiplies once, all at once, each with `matmul_threads`.
  const auto round = [&](int blas_threads, int matmul_threads) -> Status {
    kernels::SetBlasThreads(blas_threads);
    std::vector<Status> errors(static_cast<size_t>(devices));
    team.Run(devices, [&](int d) {
      kernels::SetMatmulThreads(matmul_threads);
      Result<Tensor> out = kernels::Matmul(a, b, {});
      if (out.ok()) {
        Sink(out->as<float>()[0]);
      } else {
        errors[static_cast<size_t>(d)] = out.status();
      }
    });
    for (Status& e : errors) ATOLL_RETURN_IF_ERROR(e);
    return Status::Ok();
  };
  std::vector<Series> series = {
      {"per_device", [&] { return round(1, share); }},
      {"openblas_default", [&] { return round(blas_default, 0); }},
  };
  ATOLL_RETURN_IF_ERROR(Measure(series, 2.0 * n * n * n * devices, 1e9, sweep));
  kernels::SetBlasThreads(blas_default);
  for (Series& s : series) {
    fmt::print("devices={} n={:>5} {:>16}: {:8.2f} GFLOP/s in all (median of {})\n", devices, n,
               s.name, Median(s.samples), s.samples.size());
    result.Add(s.name, {{"devices", devices}, {"n", n}}, "devices_gflops", "GFLOP/s", s.samples);
  }
  result.Derive(fmt::format("devices_ratio_n_{}_devices_{}", n, devices),
                Median(series[0].samples) / Median(series[1].samples));
  std::fflush(stdout);
  return Status::Ok();
}

}  // namespace atl::bench
