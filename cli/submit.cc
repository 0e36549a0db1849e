// `atoll submit JOB.toml`: runs a job (cli/job.h) on the cluster and prints its results.
#include "cli/submit.h"

#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/job.h"

namespace atl {

namespace {

struct SubmitOptions {
  std::string job_path;
  bool json = false;
  int64_t timeout_s = 60;
};

void Submit(const SubmitOptions& options, const GlobalOptions& global) {
  auto job = LoadJob(options.job_path);
  if (!job.ok()) Fail(job.status());
  auto cluster = ResolveCluster(global);
  if (!cluster.ok()) Fail(cluster.status());
  auto client =
      Client::Connect({.rm_endpoint = cluster->rm_endpoint, .name = "submit:" + job->name});
  if (!client.ok()) Fail(client.status().WithContext("connect to " + cluster->rm_endpoint));
  auto result = RunJob(**client, *job, std::chrono::seconds(options.timeout_s));
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
  auto options = std::make_shared<SubmitOptions>();
  auto* cmd = app.add_subcommand("submit", "Run a job (a program described in TOML)");
  cmd->add_option("job", options->job_path, "the job file, e.g. examples/figure2.toml")->required();
  cmd->add_flag("--json", options->json, "print the results as one JSON object");
  cmd->add_option("--timeout-s", options->timeout_s, "how long to wait for results (seconds)");
  cmd->callback([options, &global] { Submit(*options, global); });
}

}  // namespace atl
