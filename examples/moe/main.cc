// atoll-example-moe: a mixture-of-experts layer with top-k gating, one expert per device,
// tokens routed to their experts by the data (examples/moe/moe.h), trained with Adam on
// synthetic data. Without --rm it starts its own local cluster. Prints a line per step (loss,
// rows each expert got, throughput) and a summary.
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "examples/common/example_cluster.h"
#include "examples/moe/moe.h"

namespace {

int Main(int argc, char** argv) {
  CLI::App app{"A mixture-of-experts layer, one expert per device, trained on synthetic data"};
  atl::examples::MoeConfig config;
  atl::examples::ExampleCluster cluster(ATOLL_EXAMPLE_CONFIG);
  std::string island = "island0";
  cluster.AddOptions(app);
  app.add_option("--island", island, "the island of the slices")->capture_default_str();
  app.add_option("--experts", config.experts, "experts, one per device")->capture_default_str();
  app.add_option("--top-k", config.top_k, "experts per token")->capture_default_str();
  app.add_option("--tokens", config.tokens, "tokens per step")->capture_default_str();
  app.add_option("--hidden", config.hidden, "hidden units per expert")->capture_default_str();
  app.add_option("--steps", config.steps, "training steps")->capture_default_str();
  app.add_option("--lr", config.learning_rate, "Adam learning rate")->capture_default_str();
  app.add_option("--seed", config.seed, "gate, teacher, weights and data")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  auto client = cluster.Connect("example-moe");
  if (!client.ok()) {
    fmt::print(stderr, "error: {}\n", client.status().ToString());
    return 1;
  }
  fmt::print(
      "MoE of {} experts ({}-{}-{}) on {} devices of {}, top-{} of {} tokens, {} steps "
      "of Adam (lr {})\n",
      config.experts, config.width, config.hidden, config.width, config.experts, island,
      config.top_k, config.tokens, config.steps, config.learning_rate);
  auto result = atl::examples::TrainMoe(**client, island, config, [&](const auto& step) {
    fmt::print("step {:3}/{}  loss {:.4f}  rows per expert {}  {:8.0f} tokens/s\n", step.step,
               config.steps, step.loss, fmt::join(step.routed, "/"),
               static_cast<double>(config.tokens) / step.elapsed.count());
    std::fflush(stdout);
  });
  if (!result.ok()) {
    fmt::print(stderr, "error: {}\n", result.status().ToString());
    return 1;
  }
  fmt::print("done: loss {:.4f} -> {:.4f} in {} steps, {:.0f} tokens/s on average\n",
             result->losses.front(), result->losses.back(), config.steps,
             static_cast<double>(config.tokens) * config.steps / result->elapsed.count());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
