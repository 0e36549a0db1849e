// A mixture-of-experts layer trained on synthetic data. Each token goes to the k experts a
// fixed gate scores highest (top-k of x wg, weighted by the softmax of those k scores);
// the experts are 2-layer GELU MLPs, one per device of an expert slice, each with its own
// weights. The gate runs on the devices: the program takes the tokens and wg and routes
// by the choices the token slice computes. One traced program per step:
//   dispatch (token slice)   the gate: logits x wg, their top k per token (TopK), the
//                            softmax of those k and each choice's column (Column); then
//                            Route sends each token's row to the shard of each of its k
//                            experts, and nowhere else;
//   experts  (expert slice)  each device runs its rows through its own MLP (GroupedMatmul),
//                            and Route sends the outputs back to the tokens' slice;
//   combine  (token slice)   adds each token's k outputs, weighted by the gate
//                            (ScatterAddRows), and computes the loss: the mean squared error
//                            against a teacher MoE with the same gate and other experts;
//   backward (expert slice)  gathers each routed row's gradient (GatherRows), computes each
//                            expert's weight gradients over its own rows (GroupedWeightGrad)
//                            and takes an Adam step.
// The routed nodes have data-dependent shapes, so they are dispatched sequentially. The
// expert weights and Adam moments stay in the object stores between steps (each step takes
// the previous run's futures); the gate is fixed (not trained), so the experts' weights are
// what trains. The client computes the same gate on its own (MakeMoeBatch), for the
// teacher's targets and for DenseMoe, the reference the cluster's output is checked against.
//
// Example:
//   atl::examples::MoeConfig config;  // 64 tokens/step, width 16, 4 experts of 32, top-2
//   auto result = atl::examples::TrainMoe(*client, "island0", config, PrintStep);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "atoll/client.h"
#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::examples {

struct MoeConfig {
  int64_t tokens = 64;  // per step
  int64_t width = 16;   // of a token
  int64_t hidden = 32;  // of an expert's MLP
  int experts = 4;      // one per device of the expert slice
  int top_k = 2;        // experts per token, <= experts
  int steps = 30;
  double learning_rate = 0.01;  // Adam's
  uint32_t seed = 1;            // of the gate, the teacher, the initial weights, the data
  std::chrono::milliseconds step_timeout{30000};
};

// An MoE layer's expert weights: expert e's MLP is gelu(x w1[e]) w2[e].
struct MoeParams {
  Tensor w1;  // f32 [experts, width, hidden]
  Tensor w2;  // f32 [experts, hidden, width]
};

struct MoeBatch {
  Tensor x;     // f32 [tokens, width], uniform in [-1, 1]
  Tensor gate;  // wg, f32 [width, experts]: the same every step; the program's gate
  // The gate computed on the client (in double), for the targets and DenseMoe; the
  // program computes its own on the devices from x and gate.
  std::vector<Tensor> choices;  // per k: i32 [tokens], the k-th best expert of each token
  std::vector<Tensor> weights;  // per k: f32 [tokens], its gate weight
  Tensor target;                // f32 [tokens, width]: the teacher's output for x
};

// Random initial weights, from config.seed.
MoeParams InitMoe(const MoeConfig& config);
// Step `step`'s batch: fresh tokens each step, one fixed gate, the targets from one fixed
// teacher for the whole run.
MoeBatch MakeMoeBatch(const MoeConfig& config, int step);
// The layer's output computed on the client, token by token through its k experts: what
// the cluster's forward pass must give.
Tensor DenseMoe(const MoeParams& params, const MoeBatch& batch);

struct MoeStep {
  int step = 0;                             // from 1
  double loss = 0;                          // mean squared error, before this step's update
  std::vector<Tensor> choices;              // per k: i32 [tokens], the devices' gate's
  std::vector<int64_t> routed;              // rows each expert got (all k choices)
  std::chrono::duration<double> elapsed{};  // submit to results
  const MoeParams* params = nullptr;        // the weights the step ran with
  const MoeBatch* batch = nullptr;
  const Tensor* output = nullptr;  // the layer's output on batch->x, f32 [tokens, width]
};

struct MoeResult {
  MoeParams params;            // after the last step
  std::vector<double> losses;  // one per step
  std::chrono::duration<double> elapsed{};
};

// Takes a 1-device token slice and a config.experts-device expert slice on `island`,
// registers the step's functions and runs config.steps steps, calling `on_step` after each.
// Errors: a config out of range, or the first one from a slice, a registration or a step
// (which names it).
Result<MoeResult> TrainMoe(Client& client, const std::string& island, const MoeConfig& config,
                           const std::function<void(const MoeStep&)>& on_step = {});

}  // namespace atl::examples
