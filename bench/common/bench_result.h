// BenchResult: collects one benchmark's figures and writes them as bench/results/NAME.json in
// the shape every atoll result has (shared BENCH.md), so that bench/report.py can read any
// result:
//
//   {"bench", "commit", "machine": {"cores", "cpu", "date"}, "quick",
//    "rows": [{"series", "params", "metric", "unit", "runs", "min", "median", "max"}],
//    "derived": {NAME: number}}
//
// Example:
//   atl::bench::BenchResult r("dispatch", options.quick);
//   r.Add("chained", {{"hosts", 4}, {"compute_us", 0}}, "computations_per_s", "1/s", samples);
//   r.Derive("breakeven_compute_ms_hosts_8", 0.7);
//   atl::Status s = r.Write(options.out_dir);  // <out_dir>/dispatch.json
//
// Not thread-safe: one thread collects and writes.
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "atoll/status.h"

namespace atl::bench {

// min, median and max of a row's samples. The median of an even count is the mean of the
// two middle samples.
struct Summary {
  size_t runs = 0;
  double min = 0;
  double median = 0;
  double max = 0;
};

// Summarises `samples`; InvalidArgument when there are none or one is NaN or infinite.
Result<Summary> Summarize(std::vector<double> samples);

// The median of `samples` (at least one), as Summarize takes it.
double Median(std::vector<double> samples);

// One point of a sweep: a named number or string ("hosts" = 4, "policy" = "fifo").
struct Param {
  template <typename T>
  requires(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) Param(std::string param_name, T v)
      : name(std::move(param_name)), value(v) {}
  Param(std::string param_name, std::string v) : name(std::move(param_name)), value(std::move(v)) {}
  Param(std::string param_name, const char* v) : name(std::move(param_name)), value(v) {}

  std::string name;
  nlohmann::json value;  // a number or a string
};
using Params = std::vector<Param>;

// The machine a result was measured on.
struct Machine {
  unsigned cores = 0;  // std::thread::hardware_concurrency()
  std::string cpu;     // "model name" of /proc/cpuinfo; "unknown" when it has none
  std::string date;    // local date, YYYY-MM-DD
};

// This machine, now.
Machine ThisMachine();

// The commit measured: $ATOLL_COMMIT when set and not empty, else `git rev-parse --short HEAD`
// in the source tree, else "unknown".
std::string CurrentCommit();

class BenchResult {
 public:
  // `bench` names the result file (bench/results/<bench>.json); `quick` says whether the
  // figures come from the benchmark's --quick size. Commit and machine are taken now.
  BenchResult(std::string bench, bool quick);

  // Adds one row: `series` (the system or mode measured), `params` (the point on the sweep,
  // kept in the given order), `metric` and its `unit`, and one sample per run. Rows with no
  // samples, a non-finite sample or a repeated param name are not added; the first such
  // error is kept and returned by Write().
  void Add(std::string series, Params params, std::string metric, std::string unit,
           std::vector<double> samples);

  // Records a figure computed from rows (a ratio, a break-even point), named with its unit
  // or point. A later Derive of the same name replaces the value; a non-finite value is an
  // error returned by Write().
  void Derive(std::string name, double value);

  // Overrides what the constructor found (for tests, or a result measured elsewhere).
  void set_commit(std::string commit) { commit_ = std::move(commit); }
  void set_machine(Machine machine) { machine_ = std::move(machine); }

  const std::string& bench() const { return bench_; }
  size_t rows() const { return rows_.size(); }

  // The result file's contents, keys in the documented order.
  nlohmann::ordered_json ToJson() const;

  // Writes <dir>/<bench>.json (creating dir; replacing the file atomically: written beside it,
  // then renamed). Returns the first error of Add/Derive, or an error naming the path when it
  // cannot be written.
  Status Write(const std::string& dir) const;

 private:
  struct Row {
    std::string series;
    Params params;
    std::string metric;
    std::string unit;
    Summary summary;
  };

  void Remember(Status error);

  std::string bench_;
  bool quick_;
  std::string commit_;
  Machine machine_;
  std::vector<Row> rows_;
  std::vector<std::pair<std::string, double>> derived_;  // in first-Derive order
  Status first_error_;
};

}  // namespace atl::bench
