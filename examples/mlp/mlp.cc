#include "examples/mlp/mlp.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "atoll/function.h"
#include "atoll/grad.h"
#include "atoll/program.h"
#include "examples/common/uniform.h"

namespace atl::examples {

MlpInputs DeclareMlpInputs(FunctionBuilder& b, const MlpConfig& c) {
  MlpInputs in;
  in.x = b.Input(DType::kF32, {c.batch, c.inputs}, Sharding::Split(0));
  in.labels = b.Input(DType::kI32, {c.batch}, Sharding::Split(0));
  in.w1 = b.Input(DType::kF32, {c.inputs, c.hidden}, Sharding::Replicated());
  in.b1 = b.Input(DType::kF32, {c.hidden}, Sharding::Replicated());
  in.w2 = b.Input(DType::kF32, {c.hidden, c.classes}, Sharding::Replicated());
  in.b2 = b.Input(DType::kF32, {c.classes}, Sharding::Replicated());
  return in;
}

FunctionBuilder MlpLoss(const MlpConfig& c) {
  FunctionBuilder b("mlp_loss");
  const auto [x, labels, w1, b1, w2, b2] = DeclareMlpInputs(b, c);
  // What the matmuls and the activations take (bf16 under mixed precision), and f32 for the
  // loss; in f32 precision both leave a value as it is. Grad differentiates through the
  // casts, so the gradients come back f32, the master weights' dtype.
  const bool mixed = c.precision != DType::kF32;
  auto low = [&](Value v) { return mixed ? b.Cast(v, c.precision) : v; };
  auto wide = [&](Value v) { return mixed ? b.Cast(v, DType::kF32) : v; };

  const Value h = b.Gelu(b.BiasAdd(b.Matmul(low(x), low(w1)), low(b1)));
  const Value logits = b.BiasAdd(b.Matmul(h, low(w2)), low(b2));
  // Each device's share of the batch's mean, summed over the devices.
  b.Output(b.AllReduceSum(b.CrossEntropy(wide(logits), labels).loss));
  return b;
}

Result<FunctionBuilder> MlpGradients(const MlpConfig& c) {
  return ValueAndGrad(MlpLoss(c), {2, 3, 4, 5});
}

namespace {

// One SGD step: the loss and gradients, then every weight less lr times its gradient.
// Inputs: x, labels (rows split over the slice), w1, b1, w2, b2 (replicated).
// Outputs: the updated w1, b1, w2, b2 and the loss before the update.
Result<FunctionBuilder> TrainStep(const MlpConfig& c) {
  ATOLL_ASSIGN_OR_RETURN(const FunctionBuilder gradients, MlpGradients(c));
  FunctionBuilder b("mlp_train_step");
  const MlpInputs in = DeclareMlpInputs(b, c);
  const std::vector<Value> weights = {in.w1, in.b1, in.w2, in.b2};
  const std::vector<Value> loss_and_grads =
      b.Call(gradients, {in.x, in.labels, in.w1, in.b1, in.w2, in.b2});
  if (!b.status().ok()) return b.status();
  for (size_t i = 0; i < weights.size(); ++i) {
    b.Output(b.SgdUpdate(weights[i], loss_and_grads[1 + i], c.learning_rate));
  }
  b.Output(loss_and_grads[0]);
  return b;
}

}  // namespace

MlpParams InitMlp(const MlpConfig& c) {
  std::mt19937 rng(c.seed);
  return {Uniform(rng, {c.inputs, c.hidden}, 1.0f / std::sqrt(static_cast<float>(c.inputs))),
          Tensor(DType::kF32, {c.hidden}),
          Uniform(rng, {c.hidden, c.classes}, 1.0f / std::sqrt(static_cast<float>(c.hidden))),
          Tensor(DType::kF32, {c.classes})};
}

MlpBatch MakeMlpBatch(const MlpConfig& c, int step) {
  std::mt19937 teacher_rng(c.seed ^ 0x7eac4e7u);
  const Tensor teacher = Uniform(teacher_rng, {c.inputs, c.classes}, 1.0f);
  std::mt19937 rng(c.seed * 7919u + static_cast<uint32_t>(step));
  MlpBatch batch{Uniform(rng, {c.batch, c.inputs}, 1.0f), Tensor(DType::kI32, {c.batch})};
  const auto x = batch.x.as<float>();
  const auto t = teacher.as<float>();
  for (int64_t i = 0; i < c.batch; ++i) {
    std::vector<double> score(c.classes);
    for (int64_t k = 0; k < c.inputs; ++k) {
      for (int64_t j = 0; j < c.classes; ++j)
        score[j] += x[i * c.inputs + k] * t[k * c.classes + j];
    }
    batch.labels.as<int32_t>()[i] =
        static_cast<int32_t>(std::max_element(score.begin(), score.end()) - score.begin());
  }
  return batch;
}

Result<MlpResult> TrainMlp(Client& client, const Slice& slice, const MlpConfig& config,
                           const std::function<void(const MlpStep&)>& on_step) {
  if (config.steps < 1 || config.batch % slice.num_devices() != 0) {
    return InvalidArgument(
        fmt::format("need steps >= 1 and a batch ({}) that divides over {} devices", config.batch,
                    slice.num_devices()));
  }
  ATOLL_ASSIGN_OR_RETURN(const FunctionBuilder builder, TrainStep(config));
  ATOLL_ASSIGN_OR_RETURN(Function step, client.Register(builder, slice));
  ProgramBuilder p;
  std::vector<Traced> args;
  args.push_back(p.Arg(DType::kF32, {config.batch, config.inputs}));
  args.push_back(p.Arg(DType::kI32, {config.batch}));
  const MlpParams init = InitMlp(config);
  for (const Tensor* t : {&init.w1, &init.b1, &init.w2, &init.b2}) {
    args.push_back(p.Arg(DType::kF32, t->shape()));
  }
  p.Return(p.Call(step, args));
  ATOLL_ASSIGN_OR_RETURN(Program program, p.Build());

  MlpResult result{init, {}, {}};
  const auto start = std::chrono::steady_clock::now();
  for (int s = 1; s <= config.steps; ++s) {
    const auto step_start = std::chrono::steady_clock::now();
    MlpBatch batch = MakeMlpBatch(config, s);
    MlpParams& w = result.params;
    ATOLL_ASSIGN_OR_RETURN(
        Run run, client.Submit(program, {std::move(batch.x), std::move(batch.labels), w.w1, w.b1,
                                         w.w2, w.b2}));
    auto outputs = run.Wait(config.step_timeout);
    if (!outputs.ok()) return outputs.status().WithContext(fmt::format("step {}", s));
    w = {std::move((*outputs)[0]), std::move((*outputs)[1]), std::move((*outputs)[2]),
         std::move((*outputs)[3])};
    result.losses.push_back((*outputs)[4].as<float>()[0]);
    if (on_step) {
      on_step({s, result.losses.back(), std::chrono::steady_clock::now() - step_start});
    }
  }
  result.elapsed = std::chrono::steady_clock::now() - start;
  return result;
}

}  // namespace atl::examples
