// atoll-example-tensor-parallel: Megatron-style tensor parallelism with ZeRO-1 sharded Adam
// state, training a stack of residual MLP blocks on a (data x model) mesh of devices
// (examples/tensor_parallel/tensor_parallel.h). Without --rm it starts its own local cluster
// (the topology of config/test.toml, on free loopback ports) and stops it at the end; with
// --rm it uses a running one (`atoll up`). Prints a line per step (loss, throughput) and a
// summary.
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "examples/common/example_cluster.h"
#include "examples/common/training_log.h"
#include "examples/tensor_parallel/tensor_parallel.h"

namespace {

int Main(int argc, char** argv) {
  CLI::App app{
      "Tensor-parallel (Megatron) training of residual MLP blocks with ZeRO-1 sharded Adam on "
      "a data x model mesh of atoll devices"};
  atl::examples::TensorParallelConfig config;
  atl::examples::ExampleCluster cluster(ATOLL_EXAMPLE_CONFIG);
  int64_t data = 2;
  int64_t model = 2;
  std::string island = "island0";
  cluster.AddOptions(app);
  app.add_option("--data", data, "devices along the data axis (the batch is cut over them)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--model", model, "devices along the model axis (each block is cut over them)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--island", island, "the island of the slice")->capture_default_str();
  app.add_option("--steps", config.steps, "training steps")->capture_default_str();
  app.add_option("--batch", config.batch, "examples per step")->capture_default_str();
  app.add_option("--width", config.width, "the residual stream's width (and classes)")
      ->capture_default_str();
  app.add_option("--hidden", config.hidden, "each block's hidden units")->capture_default_str();
  app.add_option("--blocks", config.blocks, "residual MLP blocks")->capture_default_str();
  app.add_option("--lr", config.adam.learning_rate, "Adam learning rate")->capture_default_str();
  app.add_option("--seed", config.seed, "weights and data")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  auto client = cluster.Connect("example-tensor-parallel");
  if (!client.ok()) {
    fmt::print(stderr, "error: {}\n", client.status().ToString());
    return 1;
  }
  auto slice = (*client)->CreateMeshSlice({data, model}, island);
  if (!slice.ok()) {
    fmt::print(stderr, "error: {}\n", slice.status().ToString());
    return 1;
  }
  fmt::print(
      "{} residual MLP blocks ({}-{}-{}) on a {}x{} (data x model) mesh of {}, batch {}, {} "
      "steps of Adam (lr {}) with ZeRO-1 state\n",
      config.blocks, config.width, config.hidden, config.width, data, model, island, config.batch,
      config.steps, config.adam.learning_rate);
  const auto batch = static_cast<double>(config.batch);
  auto result = atl::examples::TrainTensorParallel(**client, *slice, config, [&](const auto& s) {
    atl::examples::PrintStep(s.step, config.steps, s.loss, batch, s.elapsed);
  });
  return atl::examples::Finish(result, batch);
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
