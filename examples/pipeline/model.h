// The model both trainers of this example use (pipeline.h: one block per stage; data_parallel.h:
// every block on every device of one slice): S residual MLP blocks y = x + gelu(x w1) w2 and a
// cross-entropy head, trained by SGD on synthetic data from a fixed random teacher. Each
// backward function is Grad (include/atoll/grad.h) of its forward one: a block's takes the
// cotangent the next stage sends back, the head's the loss. Also the training loop they share: one
// traced program per step, whose new weights stay in the object stores and feed the next step as
// Futures.
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

struct PipelineConfig {
  int stages = 16;  // blocks
  int micro_batches = 4;
  int64_t micro_batch = 8;  // rows per micro-batch
  int64_t width = 16;       // the residual stream; also the number of classes of the head
  int64_t hidden = 32;
  int steps = 10;
  double learning_rate = 0.5;
  uint32_t seed = 1;
  // Modelled compute of one block on one micro-batch, forward and backward: a spin op that
  // occupies the device for that long (on `sim` devices it sleeps; on `cpu` devices it
  // busy-waits). 0: none, only the real arithmetic.
  double forward_us = 0;
  double backward_us = 0;
  std::chrono::milliseconds step_timeout{60000};
};

struct PipelineResult {
  std::vector<Tensor> params;  // w1, w2 of block 0, then of block 1, ...
  std::vector<double> losses;  // per step, the mean over the step's rows
  std::chrono::duration<double> elapsed{};
};

struct PipelineStep {
  int step = 0;  // from 1
  double loss = 0;
  // Since the previous step's loss arrived (the first: since training started).
  std::chrono::duration<double> elapsed{};
};

// How a set of block functions sees its rows: `rows` per call, replicated on a 1-device
// slice (a pipeline stage) or split over the slice's devices (data parallel, whose partial
// weight gradients and loss are all-reduced). `*_us`: the spin per call, per device.
struct BlockLayout {
  int64_t rows = 0;
  bool split_rows = false;
  double forward_us = 0;
  double backward_us = 0;
  double loss_scale = 1;     // the head's loss is loss_scale * mean cross-entropy
  double learning_rate = 0;  // of the update, applied to the gradients as summed
};

// The functions of one block, and of the head, compiled on one slice.
struct BlockFunctions {
  Function forward;     // (x, w1, w2) -> y
  Function backward;    // (x, w1, w2, dy) -> dx, dw1, dw2
  Function accumulate;  // (x, w1, w2, dy, g1, g2) -> dx, g1 + dw1, g2 + dw2
  Function update;      // (w1, w2, g1, g2) -> w1 - lr g1, w2 - lr g2
  Function head;        // (y, labels) -> scaled loss, dy (its gradient)
  Function head_sum;    // (y, labels, loss) -> loss + scaled loss, dy
};

// The builders behind them (without the spins that model compute time), which the tests
// compare with hand-written backward passes:
// (x, w1, w2) -> x + gelu(x w1) w2.
FunctionBuilder BlockForward(const PipelineConfig& c, const BlockLayout& layout);
// Grad of BlockForward with the cotangent dy: (x, w1, w2, dy[, g1, g2]) -> dx, dw1 [+ g1],
// dw2 [+ g2], the weight gradients whole on every device. Spins layout.backward_us.
Result<FunctionBuilder> BlockBackward(const PipelineConfig& c, const BlockLayout& layout,
                                      bool accumulate);
// (y, labels) -> loss_scale * the mean cross-entropy of the logits y.
FunctionBuilder HeadLoss(const PipelineConfig& c, const BlockLayout& layout);
// ValueAndGrad of HeadLoss: (y, labels[, loss]) -> [loss +] the scaled loss, its gradient dy.
Result<FunctionBuilder> Head(const PipelineConfig& c, const BlockLayout& layout, bool sum);

Result<BlockFunctions> RegisterBlock(Client& client, const Slice& slice, const PipelineConfig& c,
                                     const BlockLayout& layout);

// Micro-batch m of step `step`: inputs [micro_batch, width] and i32 labels [micro_batch].
std::pair<Tensor, Tensor> MicroBatch(const PipelineConfig& c, int step, int m);

// Output `i` of a traced call; a call the tracer refused has none, and Build() says why.
Traced Output(const std::vector<Traced>& outputs, size_t i);

// Runs c.steps steps of `step_program`, whose arguments are w1, w2 per block, then
// data(step), and whose results are the new w1, w2 per block, then the step's mean loss.
// The weights stay in the object stores between steps; step k+1 is submitted before step
// k's loss is read, so that no client round trip sits between steps.
Result<PipelineResult> Train(Client& client, const Program& step_program, const PipelineConfig& c,
                             const std::function<std::vector<Tensor>(int step)>& data,
                             const std::function<void(const PipelineStep&)>& on_step);

}  // namespace atl::examples
