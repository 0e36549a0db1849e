// Tensor parallelism with ZeRO-1: a stack of Megatron-style residual MLP blocks trained on a
// 2-D mesh of devices, (data, model). The batch is cut along the data axis; inside a block
// the first matmul's weights are cut by columns and the second's by rows along the model
// axis, so each device holds a slice of the hidden layer and the block's output is one
// all-reduce over the model axis (in the backward, the gradient of the block's input is the
// mirror all-reduce). Adam's moments, and its f32 master copy of each weight, are cut along
// the data axis as well (ZeRO stage 1): the weights' gradients are reduce-scattered over the
// data axis, each device updates its shard with its shard of the moments, and the weights
// are all-gathered again for the next step. One compiled function per step, its state kept
// in the object stores between steps; the backward pass is written with the ops.
//
// On a 1x1 mesh the same function is plain single-device training, which is what the
// parallel run is checked against.
//
// Example:
//   atl::examples::TensorParallelConfig config;          // 2 blocks of 16-64-16
//   auto slice = client->CreateMeshSlice({2, 2}).value();  // data x model
//   auto result = atl::examples::TrainTensorParallel(*client, slice, config, PrintStep);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "atoll/client.h"
#include "atoll/function.h"
#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::examples {

struct TensorParallelConfig {
  int64_t batch = 32;   // global; a multiple of the data axis
  int64_t width = 16;   // the residual stream, and the classes; a multiple of the data axis
  int64_t hidden = 64;  // each block's hidden layer; a multiple of the model axis
  int blocks = 2;
  int steps = 30;
  AdamOptions adam = {.learning_rate = 0.01};
  uint32_t seed = 1;  // of the initial weights and of the data
  std::chrono::milliseconds step_timeout{30000};
};

// One block's weights: x + (gelu(x w1 + b1) w2 + b2).
struct BlockWeights {
  Tensor w1;  // [width, hidden]
  Tensor b1;  // [hidden]
  Tensor w2;  // [hidden, width]
  Tensor b2;  // [width]
};

// Small random weights and zero biases, from config.seed.
std::vector<BlockWeights> InitBlocks(const TensorParallelConfig& config);

struct TensorParallelStep {
  int step = 0;     // from 1
  double loss = 0;  // the batch's mean cross-entropy, before this step's update
  std::chrono::duration<double> elapsed{};  // submit to loss
};

struct TensorParallelResult {
  std::vector<BlockWeights> weights;  // after the last step
  std::vector<double> losses;         // one per step
  std::chrono::duration<double> elapsed{};
};

// Registers the training step on `slice`, a 2-D mesh (data, model), and runs config.steps
// steps, calling `on_step` after each. InvalidArgument when a size does not divide over its
// axis; else the first error of registering or of a step (which names it).
Result<TensorParallelResult> TrainTensorParallel(
    Client& client, const Slice& slice, const TensorParallelConfig& config,
    const std::function<void(const TensorParallelStep&)>& on_step = {});

}  // namespace atl::examples
