#include "bench/kernels/measure.h"

#include <algorithm>
#include <chrono>

namespace atl::bench {

namespace {

using Clock = std::chrono::steady_clock;

volatile float g_sink = 0;

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

}  // namespace

Status Measure(std::vector<Series>& series, double work, double unit, const Sweep& sweep) {
  for (Series& s : series) {
    ATOLL_ASSIGN_OR_RETURN(s.iterations, Calibrate(s, sweep.sample_s));
  }
  for (int r = 0; r < sweep.runs; ++r) {
    for (size_t j = 0; j < series.size(); ++j) {
      Series& s = series[r % 2 == 0 ? j : series.size() - 1 - j];
      const auto start = Clock::now();
      for (int64_t i = 0; i < s.iterations; ++i) ATOLL_RETURN_IF_ERROR(s.run());
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      s.samples.push_back(work * static_cast<double>(s.iterations) / elapsed / unit);
    }
  }
  return Status::Ok();
}

Tensor Random(std::mt19937& rng, Shape shape, float lo, float hi) {
  Tensor t(DType::kF32, std::move(shape));
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.as<float>()) v = dist(rng);
  return t;
}

void Sink(float v) { g_sink = g_sink + v; }

}  // namespace atl::bench
