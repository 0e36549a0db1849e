// A mixture-of-experts layer trained on synthetic data. Each token goes to the k experts
// its gate scores highest (top-k of x wg, weighted by the softmax of those k scores); the
// experts are 2-layer GELU MLPs, one per device of an expert slice, each with its own
// weights. The gate runs on the devices: the program takes the tokens and wg and routes
// by the choices the token slice computes. One traced program per step:
//   dispatch (token slice)   the gate: logits x wg, their top k per token (TopK), the
//                            softmax of those k (MoeGate) and each choice's column (Column);
//                            then Route sends each token's row to the shard of each of its k
//                            experts, and nowhere else;
//   experts  (expert slice)  each device runs its rows through its own MLP (GroupedMatmul),
//                            and Route sends the outputs back to the tokens' slice;
//   combine  (token slice)   puts each choice's rows back in token order (ScatterAddRows),
//                            adds them weighted by the gate, and computes the loss (the mean
//                            squared error against a teacher MoE) with its gradients with
//                            respect to the experts' outputs and the gate weights
//                            (ValueAndGrad of MoeLoss);
//   expert_update (experts)  gathers each routed row's gradient (GatherRows), back through
//                            the experts (Grad of MoeExperts: each expert's weight gradients
//                            over its own rows) and an Adam step;
//   gate_update (tokens)     the gate weights' gradient back through the softmax, the top-k
//                            values and x wg (Grad of MoeGate) and an Adam step of wg.
// The routed nodes have data-dependent shapes, so they are dispatched sequentially. The
// weights and Adam moments stay in the object stores between steps (each step takes the
// previous run's futures). The client computes the same gate on its own (ChooseExperts),
// for the teacher's targets and for DenseMoe, the reference the cluster's output is checked
// against.
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
#include "atoll/function.h"
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
  double learning_rate = 0.01;  // Adam's, of the experts and the gate
  uint32_t seed = 1;            // of the teacher, the initial weights, the data
  std::chrono::milliseconds step_timeout{30000};
};

// An MoE layer's weights: its gate wg, and expert e's MLP gelu(x w1[e]) w2[e].
struct MoeParams {
  Tensor gate;  // f32 [width, experts]
  Tensor w1;    // f32 [experts, width, hidden]
  Tensor w2;    // f32 [experts, hidden, width]
};

struct MoeBatch {
  Tensor x;       // f32 [tokens, width], uniform in [-1, 1]
  Tensor target;  // f32 [tokens, width]: the teacher's output for x
};

// The gate's choices, computed on the client in double.
struct GateChoices {
  std::vector<Tensor> experts;  // per k: i32 [tokens], the k-th best expert of each token
  std::vector<Tensor> weights;  // per k: f32 [tokens], its gate weight
};

// Random initial weights, from config.seed.
MoeParams InitMoe(const MoeConfig& config);
// Step `step`'s batch: fresh tokens each step, the targets from one fixed teacher MoE (its own
// gate and experts) for the whole run.
MoeBatch MakeMoeBatch(const MoeConfig& config, int step);
// Each token's top-k experts by x gate, best first (the lower index first among equal
// scores), weighted by the softmax of their scores: what the devices' gate chooses.
GateChoices ChooseExperts(const Tensor& gate, const Tensor& x, int top_k);
// The layer's output computed on the client, token by token through its k experts: what
// the cluster's forward pass must give.
Tensor DenseMoe(const MoeParams& params, const Tensor& x, int top_k);

// The differentiated functions of the step (the tests check their gradients against
// hand-written ones):
// The experts: (x_0 .. x_{k-1}, w1, w2) -> y_0 .. y_{k-1}, choice j's routed rows x_j
// [?, width] through each device's expert.
FunctionBuilder MoeExperts(const MoeConfig& config);
// Grad of MoeExperts by w1 and w2 with the cotangents of every y_j: (x_0 .. x_{k-1}, w1, w2,
// dy_0 .. dy_{k-1}) -> dw1, dw2.
Result<FunctionBuilder> MoeExpertGradients(const MoeConfig& config);
// The gate: (x, wg) -> the softmax of each token's k best scores x wg, f32 [tokens, k].
FunctionBuilder MoeGate(const MoeConfig& config);
// The loss: (y_0 .. y_{k-1} in token order [tokens, width], gate weights [tokens, k],
// target) -> the mean squared error of the gate-weighted sum of the y_j, and that sum.
FunctionBuilder MoeLoss(const MoeConfig& config);

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
