// How bench/kernels measures: series of one iteration each, calibrated to run for at least a
// sample's time, then sampled alternately (their order reversed every other repetition) so
// that noise from other work on the machine hits every series of a point alike.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::bench {

struct Sweep {
  std::vector<int64_t> matmul_n;        // the matmul rows' sizes
  std::vector<int64_t> device_n;        // the devices rows' sizes
  std::vector<int64_t> fused_elements;  // the fused and per-op rows' sizes
  int runs;
  double sample_s;  // the least time one sample runs for (whole iterations)
};

// One measured series: `run` does one iteration and returns its error, if any.
struct Series {
  Series(std::string series_name, std::function<Status()> body)
      : name(std::move(series_name)), run(std::move(body)) {}

  std::string name;
  std::function<Status()> run;
  int64_t iterations = 1;  // per sample, from calibration
  std::vector<double> samples;
};

// `sweep.runs` samples of every series, each in units of `unit` per second: `work` units
// per iteration (flops, elements), divided by `unit` (1e9 for GFLOP/s, 1 for elements/s).
Status Measure(std::vector<Series>& series, double work, double unit, const Sweep& sweep);

// f32 values uniform in [lo, hi).
Tensor Random(std::mt19937& rng, Shape shape, float lo = -1.0f, float hi = 1.0f);

// Results are added here so that the compiler cannot drop the work.
void Sink(float v);

}  // namespace atl::bench
