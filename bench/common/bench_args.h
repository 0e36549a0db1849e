// The command line every benchmark executable shares: `--quick` (the size that finishes in
// under a minute on 2 cores) and `--out DIR` (where NAME.json goes).
//
// Example:
//   int main(int argc, char** argv) {
//     CLI::App app{"dispatch: computations per second against hosts and compute time"};
//     atl::bench::BenchOptions options;
//     atl::bench::AddBenchOptions(app, options);
//     app.add_option("--hosts", hosts, "...");           // the benchmark's own options
//     if (auto exit_code = atl::bench::Parse(app, argc, argv)) return *exit_code;
//     ...
//   }
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "bench/common/bench_result.h"

namespace atl::bench {

struct BenchOptions {
  bool quick = false;
  // Where the result file is written; defaults to the source tree's bench/results.
  std::string out_dir = DefaultResultsDir();

  static std::string DefaultResultsDir();
};

// Adds --quick and --out DIR to `app`, bound to `options` (which must outlive parsing).
void AddBenchOptions(CLI::App& app, BenchOptions& options);

// Parses argv into `app` without letting an exception escape. Returns nothing when the
// benchmark should run; otherwise the exit status main() should return, after printing the
// help (0) or the parse error (1, on stderr).
std::optional<int> Parse(CLI::App& app, int argc, char** argv);

// The whole main() of a benchmark: parses the shared options (and the benchmark's own, which
// `add_options`, when given, adds to the app), runs `measure` (which fills the result or
// returns why it could not) and writes the result. Errors go to stderr as "<name>: ...";
// returns the process's exit status.
int RunBenchmark(int argc, char** argv, const std::string& name, const std::string& description,
                 const std::function<Status(const BenchOptions&, BenchResult&)>& measure,
                 const std::function<void(CLI::App&)>& add_options = nullptr);

}  // namespace atl::bench
