// Histogram: counts of observations by upper bound, their sum and number, as a Prometheus
// histogram reports them (prometheus_text.h writes one). Only grows: a scrape's counts are
// cumulative since the histogram was made.
//
// Example:
//   Histogram latency({0.01, 0.1, 1});  // seconds
//   latency.Observe(0.05);
//   latency.CumulativeCounts();  // {0, 1, 1}: observations <= each bound
//
// Not thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace atl {

class Histogram {
 public:
  // `bounds`: the buckets' upper bounds, ascending; +Inf is implied after the last.
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {}

  void Observe(double value) {
    // Bucket i holds the observations <= bounds_[i] and > bounds_[i - 1]; larger ones are
    // counted only in count_ (the +Inf bucket).
    auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);
    if (it != bounds_.end()) counts_[it - bounds_.begin()]++;
    sum_ += value;
    count_++;
  }

  const std::vector<double>& bounds() const { return bounds_; }
  // For each bound, how many observations were <= it.
  std::vector<uint64_t> CumulativeCounts() const {
    std::vector<uint64_t> out(counts_.size());
    uint64_t running = 0;
    for (size_t i = 0; i < counts_.size(); ++i) out[i] = running += counts_[i];
    return out;
  }
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

}  // namespace atl
