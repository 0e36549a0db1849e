// `atoll submit JOB.toml`: runs a job (job/job.h) on the cluster and prints its results.
// A job of several steps shows its progress on stderr: one line redrawn in place when
// stderr is a terminal, otherwise a plain line at every tenth of the steps.
#include "cli/submit.h"

#include <unistd.h>

#include <cmath>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "job/job.h"

namespace atl {

namespace {

struct SubmitCommandOptions {
  std::string job_path;
  bool json = false;
  int64_t timeout_s = 60;
  uint64_t steps = 0;  // 0: the job's own `steps`
  bool quiet = false;  // no progress
};

std::string Duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(std::lround(seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s / 60) % 60);
}

// Progress of a multi-step job on stderr.
class Progress {
 public:
  Progress(std::string name, bool terminal)
      : name_(std::move(name)), terminal_(terminal), start_(std::chrono::steady_clock::now()) {}

  void Step(uint64_t done, uint64_t total) {
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
    const double eta = rate > 0 ? static_cast<double>(total - done) / rate : NAN;
    if (terminal_) {
      if (done < total && now - last_draw_ < std::chrono::milliseconds(100)) return;
      last_draw_ = now;
      constexpr size_t kWidth = 24;
      const size_t filled = static_cast<size_t>(kWidth * done / total);
      std::cerr << fmt::format(
          "\r{} [{}{}] {}/{} steps  {:.1f} steps/s  {}\x1b[K", name_, std::string(filled, '#'),
          std::string(kWidth - filled, '.'), done, total, rate,
          done < total ? "ETA " + Duration(eta) : "done in " + Duration(elapsed));
      if (done == total) std::cerr << "\n";
      std::cerr << std::flush;
      return;
    }
    // A line each time another tenth of the steps is done, and at the end.
    const uint64_t tenth = done * 10 / total;
    if (done < total && tenth == last_tenth_) return;
    last_tenth_ = tenth;
    std::cerr << fmt::format("{}: step {}/{} ({:.1f} steps/s, {})", name_, done, total, rate,
                             done < total ? "ETA " + Duration(eta) : "done in " + Duration(elapsed))
              << std::endl;
  }

 private:
  std::string name_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
  uint64_t last_tenth_ = 0;
};

void Submit(const SubmitCommandOptions& options, const GlobalOptions& global) {
  auto job = LoadJob(options.job_path);
  if (!job.ok()) Fail(job.status());
  if (options.steps > 0) job->steps = options.steps;
  auto cluster = ResolveCluster(global);
  if (!cluster.ok()) Fail(cluster.status());
  auto client =
      Client::Connect({.rm_endpoint = cluster->rm_endpoint, .name = "submit:" + job->name});
  if (!client.ok()) Fail(client.status().WithContext("connect to " + cluster->rm_endpoint));
  StepCallback on_step;
  std::shared_ptr<Progress> progress;
  if (job->steps > 1 && !options.quiet) {
    progress = std::make_shared<Progress>(job->name, isatty(STDERR_FILENO) != 0);
    on_step = [progress](uint64_t done, uint64_t total) { progress->Step(done, total); };
  }
  auto result = RunJob(**client, *job, std::chrono::seconds(options.timeout_s), on_step);
  if (!result.ok()) Fail(result.status().WithContext("job '" + job->name + "'"));
  if (options.json) {
    nlohmann::ordered_json out;
    out["job"] = job->name;
    for (size_t i = 0; i < result->names.size(); ++i) {
      const Tensor& t = result->values[i];
      out["results"][result->names[i]] = {
          {"dtype", DTypeName(t.dtype())}, {"shape", t.shape()}, {"values", t.ToDoubles()}};
    }
    std::cout << out.dump() << std::endl;
    return;
  }
  for (size_t i = 0; i < result->names.size(); ++i) {
    std::cout << result->names[i] << " = " << result->values[i].ToString() << "\n";
  }
  std::cout.flush();
}

}  // namespace

void AddSubmitCommand(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<SubmitCommandOptions>();
  auto* cmd = app.add_subcommand("submit", "Run a job (a program described in TOML)");
  cmd->add_option("job", options->job_path, "the job file, e.g. examples/figure2.toml")->required();
  cmd->add_flag("--json", options->json, "print the results as one JSON object");
  cmd->add_option("--timeout-s", options->timeout_s,
                  "how long to wait for the results of each step (seconds)")
      ->check(CLI::Range(int64_t{1}, int64_t{7} * 24 * 3600));
  cmd->add_option("--steps", options->steps,
                  "run the program this many times (default: the job's `steps`, else 1)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  cmd->add_flag("--quiet,-q", options->quiet, "no progress output for multi-step jobs");
  cmd->callback([options, &global] { Submit(*options, global); });
}

}  // namespace atl
