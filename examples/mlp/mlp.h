// Data-parallel training of a 2-layer MLP classifier on synthetic data, as one compiled
// function per step: the batch is split over the slice's devices, the weights are
// replicated, and the step is the loss's gradient (Grad, include/atoll/grad.h: each device
// computes its share, and the all_reduce_sum Grad inserts adds them up) and an SGD update
// that every device takes alike. On a 1-device slice the same function is plain
// single-device training, which is what the data-parallel run is checked against.
//
// Mixed precision (precision = kBF16): the matmuls of the forward and backward passes take
// bf16 weights and activations (each computing in f32 and rounding once), the loss and its
// gradient are computed in f32 on the logits cast to f32, and SGD updates f32 master
// weights with the gradients cast to f32, as accelerators train.
//
// Example:
//   atl::examples::MlpConfig config;                 // 64 examples/step, 16-32-4 MLP
//   auto slice = client->CreateSlice(4).value();
//   auto result = atl::examples::TrainMlp(*client, slice, config, PrintStep);
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

struct MlpConfig {
  int64_t batch = 64;  // global; a multiple of the slice's device count
  int64_t inputs = 16;
  int64_t hidden = 32;
  int64_t classes = 4;
  int steps = 30;
  double learning_rate = 2.0;
  uint32_t seed = 1;              // of the initial weights and of the data
  DType precision = DType::kF32;  // of the matmuls: kF32, or kBF16 (mixed precision)
  std::chrono::milliseconds step_timeout{30000};
  // A checkpoint directory (Client::Save: relative to the object stores' checkpoint root):
  // the weights, the step number and the precision are saved there every
  // `checkpoint_every` steps and after the last. Empty: none.
  std::string checkpoint;
  int checkpoint_every = 10;
  // Starts from the checkpoint's weights and step instead of InitMlp and step 1, and runs
  // on to step `steps`: with the same sizes, seed and learning rate, the steps after it
  // are those of a run that was never interrupted. The precision is saved too (the weights
  // are the f32 master weights in either) and must be the same: another is refused.
  bool resume = false;
};

struct MlpParams {  // f32, whatever the precision (the master weights)
  Tensor w1;        // [inputs, hidden]
  Tensor b1;        // [hidden]
  Tensor w2;        // [hidden, classes]
  Tensor b2;        // [classes]
};

struct MlpBatch {
  Tensor x;       // f32 [batch, inputs], uniform in [-1, 1)
  Tensor labels;  // i32 [batch]: the class a fixed random linear teacher gives x
};

// The inputs of the model's functions, declared on `b` in this order: x and labels split over
// the slice's rows, the f32 weights replicated.
struct MlpInputs {
  Value x, labels, w1, b1, w2, b2;
};
MlpInputs DeclareMlpInputs(FunctionBuilder& b, const MlpConfig& config);

// The model's loss, a function of (x, labels, w1, b1, w2, b2): the batch's mean softmax
// cross-entropy of gelu(x w1 + b1) w2 + b2, with x and labels split over the slice's rows.
FunctionBuilder MlpLoss(const MlpConfig& config);
// ValueAndGrad of MlpLoss by w1, b1, w2, b2: (x, labels, w1, b1, w2, b2) -> loss, dw1, db1,
// dw2, db2, the gradients whole on every device.
Result<FunctionBuilder> MlpGradients(const MlpConfig& config);

// Small random weights and zero biases, from config.seed.
MlpParams InitMlp(const MlpConfig& config);
// Step `step`'s batch: fresh inputs each step, labelled by one teacher for the whole run.
MlpBatch MakeMlpBatch(const MlpConfig& config, int step);

struct MlpStep {
  int step = 0;     // from 1
  double loss = 0;  // the batch's mean cross-entropy, before this step's update
  std::chrono::duration<double> elapsed{};  // submit to results
  bool checkpointed = false;                // the weights after it were saved
};

struct MlpResult {
  MlpParams params;            // after the last step
  int first_step = 1;          // the first step run: 1, or the one after a resumed checkpoint
  std::vector<double> losses;  // one per step run
  std::chrono::duration<double> elapsed{};
};

// Registers the training step on `slice` and runs steps up to config.steps, calling
// `on_step` after each. The weights stay in the object stores between steps (each step's
// outputs feed the next as futures); only the loss is read back, and the weights after the
// last step. Errors: the first one from registering, loading, saving or a step (which
// names it).
Result<MlpResult> TrainMlp(Client& client, const Slice& slice, const MlpConfig& config,
                           const std::function<void(const MlpStep&)>& on_step = {});

}  // namespace atl::examples
