// The dtype rows of bench/kernels: a matmul in each floating dtype through the cpu backend
// (compute::RunCpuOp, the path a device runs: bf16 and f16 widened to f32, sgemm, the result
// rounded once; f64 through dgemm) against f32's, and the f32 <-> bf16/f16 conversions of
// kernels/half_convert.h at every vector width this CPU runs against a plain copy of the
// same f32 values.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/kernels/rows.h"
#include "common/ir/ir.h"
#include "compute/cpu_ops.h"
#include "kernels/cast.h"
#include "kernels/half_convert.h"

namespace atl::bench {

Status BenchMatmulDTypes(int64_t n, const Sweep& sweep, BenchResult& result) {
  std::mt19937 rng(static_cast<unsigned>(n) + 16);
  const Tensor a = Random(rng, {n, n});
  const Tensor b = Random(rng, {n, n});
  const DType dtypes[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kF64};
  std::vector<std::pair<Tensor, Tensor>> operands;
  std::vector<ir::Op> ops;
  std::vector<Series> series;
  operands.reserve(std::size(dtypes));  // the series point into it
  for (DType dtype : dtypes) {
    ATOLL_ASSIGN_OR_RETURN(Tensor da, kernels::Cast(a, dtype));
    ATOLL_ASSIGN_OR_RETURN(Tensor db, kernels::Cast(b, dtype));
    operands.emplace_back(std::move(da), std::move(db));
    ops.push_back({ir::OpCode::kMatmul, {}, 0.0, ir::SplitType(dtype, {n, n}, -1)});
  }
  for (size_t i = 0; i < std::size(dtypes); ++i) {
    series.emplace_back(std::string(DTypeName(dtypes[i])), [&, i]() -> Status {
      const Tensor* args[] = {&operands[i].first, &operands[i].second};
      ATOLL_ASSIGN_OR_RETURN(Tensor out, compute::RunCpuOp(ops[i], args));
      Sink(static_cast<float>(out.nbytes()));
      return Status::Ok();
    });
  }
  ATOLL_RETURN_IF_ERROR(Measure(series, 2.0 * n * n * n, 1e9, sweep));
  for (Series& s : series) {
    fmt::print("matmul n={:>5} {:>4}: {:8.2f} GFLOP/s (median of {})\n", n, s.name,
               Median(s.samples), s.samples.size());
    result.Add(s.name, {{"n", n}}, "dtype_matmul_gflops", "GFLOP/s", s.samples);
  }
  for (size_t i = 1; i < series.size(); ++i) {
    result.Derive(fmt::format("{}_matmul_ratio_n_{}", series[i].name, n),
                  Median(series[i].samples) / Median(series[0].samples));
  }
  std::fflush(stdout);
  return Status::Ok();
}

namespace {

// The series "narrow_NAME" (f32 `in` into `halves`) and "widen_NAME" (back into `wide`) of
// one format at one width.
template <typename H>
void AddConversions(std::vector<Series>& series, const std::string& name,
                    void (*narrow)(const float*, H*, int64_t),
                    void (*widen)(const H*, float*, int64_t), const float* in,
                    std::vector<H>& halves, std::vector<float>& wide) {
  const auto n = static_cast<int64_t>(wide.size());
  series.emplace_back("narrow_" + name, [=, &halves]() -> Status {
    narrow(in, halves.data(), n);
    Sink(static_cast<float>(halves[0].bits));
    return Status::Ok();
  });
  series.emplace_back("widen_" + name, [=, &halves, &wide]() -> Status {
    widen(halves.data(), wide.data(), n);
    Sink(wide[0]);
    return Status::Ok();
  });
}

}  // namespace

Status BenchConversions(int64_t elements, const Sweep& sweep, BenchResult& result) {
  std::mt19937 rng(static_cast<unsigned>(elements));
  const Tensor x = Random(rng, {elements}, -100.0f, 100.0f);
  const float* in = x.as<float>().data();
  std::vector<float> copy(static_cast<size_t>(elements)), wide(copy.size());
  std::vector<BF16> bf16(copy.size());
  std::vector<F16> f16(copy.size());
  std::vector<Series> series;
  series.emplace_back("copy", [&]() -> Status {
    std::memcpy(copy.data(), in, copy.size() * sizeof(float));
    Sink(copy[0]);
    return Status::Ok();
  });
  for (const kernels::internal::HalfConvert* h : kernels::internal::SupportedHalfConvert()) {
    const std::string width = h->name;
    AddConversions<BF16>(series, "bf16_" + width, h->narrow_bf16, h->widen_bf16, in, bf16, wide);
    AddConversions<F16>(series, "f16_" + width, h->narrow_f16, h->widen_f16, in, f16, wide);
  }
  ATOLL_RETURN_IF_ERROR(Measure(series, static_cast<double>(elements), 1, sweep));
  const double baseline = Median(series[0].samples);
  for (Series& s : series) {
    fmt::print("convert elements={:>8} {:>22}: {:10.3e} elements/s (median of {})\n", elements,
               s.name, Median(s.samples), s.samples.size());
    result.Add(s.name, {{"elements", elements}}, "convert_elements_per_s", "elements/s", s.samples);
    if (&s != &series[0]) {
      result.Derive(fmt::format("{}_ratio_elements_{}", s.name, elements),
                    Median(s.samples) / baseline);
    }
  }
  std::fflush(stdout);
  return Status::Ok();
}

}  // namespace atl::bench
