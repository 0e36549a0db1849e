// atoll-example-pipeline: GPipe-style training of a pipelined residual MLP (examples/
// pipeline/pipeline.h), one stage per device, on one island or split over two (the first
// half of the stages on island0, the rest on island1, joined only by DCN transfers), or
// data-parallel on N devices of island0 (--data-parallel N, the pipeline's baseline).
// Without --rm it starts its own local cluster. Prints a line per step and a summary.
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "examples/common/example_cluster.h"
#include "examples/pipeline/data_parallel.h"
#include "examples/pipeline/pipeline.h"

namespace {

int Main(int argc, char** argv) {
  CLI::App app{"Pipelined (GPipe) training of a residual MLP, one stage per device"};
  atl::examples::PipelineConfig config;
  atl::examples::ExampleCluster cluster(ATOLL_EXAMPLE_CONFIG);
  bool two_islands = false;
  int data_parallel = 0;
  cluster.AddOptions(app);
  app.add_flag("--two-islands", two_islands, "stages 0..S/2-1 on island0, the rest on island1");
  app.add_option("--data-parallel", data_parallel,
                 "train data-parallel on this many devices of island0 instead");
  app.add_option("--stages", config.stages, "pipeline stages")->capture_default_str();
  app.add_option("--micro-batches", config.micro_batches, "per step")->capture_default_str();
  app.add_option("--steps", config.steps, "training steps")->capture_default_str();
  app.add_option("--lr", config.learning_rate, "SGD learning rate")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  auto client = cluster.Connect("example-pipeline");
  if (!client.ok()) {
    fmt::print(stderr, "error: {}\n", client.status().ToString());
    return 1;
  }
  const int64_t rows = config.micro_batch * config.micro_batches;
  auto on_step = [&](const atl::examples::PipelineStep& step) {
    fmt::print("step {:3}/{}  loss {:.4f}  {:8.0f} examples/s\n", step.step, config.steps,
               step.loss, static_cast<double>(rows) / step.elapsed.count());
    std::fflush(stdout);
  };
  const std::string model = fmt::format("{} residual MLP blocks ({}-{}-{})", config.stages,
                                        config.width, config.hidden, config.width);
  const std::string batches = fmt::format("{} micro-batches of {} rows, {} steps",
                                          config.micro_batches, config.micro_batch, config.steps);
  atl::Result<atl::examples::PipelineResult> result = atl::InvalidArgument("not trained");
  if (data_parallel > 0) {
    auto slice = (*client)->CreateSlice(data_parallel, "island0");
    if (!slice.ok()) {
      fmt::print(stderr, "error: {}\n", slice.status().ToString());
      return 1;
    }
    fmt::print("{} data-parallel on {} devices of island0, {}\n", model, data_parallel, batches);
    result = atl::examples::TrainDataParallel(**client, *slice, config, on_step);
  } else {
    std::vector<atl::Slice> slices;
    for (int s = 0; s < config.stages; ++s) {
      const bool second = two_islands && s >= config.stages / 2;
      auto slice = (*client)->CreateSlice(1, second ? "island1" : "island0");
      if (!slice.ok()) {
        fmt::print(stderr, "error: stage {}: {}\n", s, slice.status().ToString());
        return 1;
      }
      slices.push_back(*slice);
    }
    fmt::print("{} as stages on {}, {}\n", model, two_islands ? "two islands" : "island0", batches);
    result = atl::examples::TrainPipeline(**client, slices, config, on_step);
  }
  if (!result.ok()) {
    fmt::print(stderr, "error: {}\n", result.status().ToString());
    return 1;
  }
  fmt::print("done: loss {:.4f} -> {:.4f} in {} steps, {:.0f} examples/s on average\n",
             result->losses.front(), result->losses.back(), config.steps,
             static_cast<double>(rows) * config.steps / result->elapsed.count());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
