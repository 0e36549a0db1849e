// atoll-example-mlp: data-parallel training of a small MLP on synthetic data (examples/mlp/
// mlp.h). Without --rm it starts its own local cluster (the topology of config/test.toml,
// on free loopback ports) and stops it at the end; with --rm it uses a running one
// (`atoll up`). Prints a line per step (loss, throughput) and a summary. --checkpoint DIR
// saves the weights every --checkpoint-every steps; --resume goes on from them.
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "examples/common/example_cluster.h"
#include "examples/common/training_log.h"
#include "examples/mlp/mlp.h"

namespace {

int Main(int argc, char** argv) {
  CLI::App app{"Data-parallel training of a 2-layer MLP on a slice of atoll devices"};
  atl::examples::MlpConfig config;
  atl::examples::ExampleCluster cluster(ATOLL_EXAMPLE_CONFIG);
  uint32_t devices = 4;
  std::string island = "island0";
  cluster.AddOptions(app);
  app.add_option("--devices", devices, "devices in the slice")->capture_default_str();
  app.add_option("--island", island, "the island of the slice")->capture_default_str();
  app.add_option("--steps", config.steps, "training steps")->capture_default_str();
  app.add_option("--batch", config.batch, "examples per step")->capture_default_str();
  app.add_option("--hidden", config.hidden, "hidden units")->capture_default_str();
  app.add_option("--lr", config.learning_rate, "SGD learning rate")->capture_default_str();
  app.add_option("--seed", config.seed, "weights and data")->capture_default_str();
  std::string precision = "f32";
  app.add_option("--precision", precision,
                 "of the matmuls: f32, or bf16 (mixed precision: bf16 weights and activations, "
                 "f32 loss and master weights)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--checkpoint", config.checkpoint,
                 "save the weights here (a directory below the object stores' checkpoint root)");
  app.add_option("--checkpoint-every", config.checkpoint_every, "steps between checkpoints")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag(
         "--resume", config.resume,
         "start from the --checkpoint's weights and step (same sizes, seed, lr and precision)")
      ->needs("--checkpoint");
  int loss_digits = 4;
  app.add_option("--loss-digits", loss_digits, "decimals of the losses printed")
      ->capture_default_str()
      ->check(CLI::Range(0, 9));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  config.precision = atl::ParseDType(precision).value();  // checked by the option
  auto client = cluster.Connect("example-mlp");
  if (!client.ok()) {
    fmt::print(stderr, "error: {}\n", client.status().ToString());
    return 1;
  }
  auto slice = (*client)->CreateSlice(devices, island);
  if (!slice.ok()) {
    fmt::print(stderr, "error: {}\n", slice.status().ToString());
    return 1;
  }
  fmt::print("MLP {}-{}-{}, batch {} split over {} devices of {}, {} steps of SGD (lr {}){}\n",
             config.inputs, config.hidden, config.classes, config.batch, devices, island,
             config.steps, config.learning_rate,
             precision == "bf16" ? ", bf16 matmuls with f32 master weights" : "");
  const auto batch = static_cast<double>(config.batch);
  bool first = true;
  auto result = atl::examples::TrainMlp(**client, *slice, config, [&](const auto& step) {
    if (first && config.resume)
      fmt::print("resumed after step {} from {}\n", step.step - 1, config.checkpoint);
    first = false;
    atl::examples::PrintStep(step.step, config.steps, step.loss, batch, step.elapsed, loss_digits,
                             step.checkpointed ? "  (checkpoint saved)" : "");
  });
  if (result.ok() && result->losses.empty()) {
    fmt::print("nothing to do: {} holds step {} already\n", config.checkpoint,
               result->first_step - 1);
    return 0;
  }
  return atl::examples::Finish(result, batch);
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
