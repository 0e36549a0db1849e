// A pipelined model: S residual MLP blocks y = x + gelu(x w1) w2, block s on its own slice
// (stage s), trained GPipe-style: each step's batch is cut into M micro-batches that flow
// forward through the stages, into a cross-entropy head on the last stage, and backward
// again; each stage sums its micro-batches' gradients and takes an SGD step. One step is
// ONE traced program of (S forward + S backward) x M + head and update calls, dispatched
// asynchronously: stages work on different micro-batches at the same time.
// Placing every stage on one slice gives the single-device run it is checked against.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "atoll/client.h"
#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::examples {

struct PipelineConfig {
  int stages = 16;
  int micro_batches = 4;
  int64_t micro_batch = 8;  // rows per micro-batch
  int64_t width = 16;       // the residual stream; also the number of classes of the head
  int64_t hidden = 32;
  int steps = 10;
  double learning_rate = 0.5;
  uint32_t seed = 1;
  std::chrono::milliseconds step_timeout{60000};
};

struct PipelineResult {
  std::vector<Tensor> params;  // w1, w2 of stage 0, then of stage 1, ...
  std::vector<double> losses;  // per step, the mean over its micro-batches
  std::chrono::duration<double> elapsed{};
};

struct PipelineStep {
  int step = 0;  // from 1
  double loss = 0;
  std::chrono::duration<double> elapsed{};
};

// Trains with stage s on slices[s] (one slice per stage; the same slice may repeat).
Result<PipelineResult> TrainPipeline(Client& client, const std::vector<Slice>& slices,
                                     const PipelineConfig& config,
                                     const std::function<void(const PipelineStep&)>& on_step = {});

}  // namespace atl::examples
