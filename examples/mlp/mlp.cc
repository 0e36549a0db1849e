#include "examples/mlp/mlp.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>

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

// The precision a checkpoint's "precision" value names (a dtype code), or the value itself
// where it names none.
std::string PrecisionName(const Tensor& saved) {
  if (saved.dtype() != DType::kI32 || saved.num_elements() != 1) return saved.ToString();
  const int32_t code = saved.as<int32_t>()[0];
  if (code < 0 || code >= static_cast<int32_t>(kNumDTypes)) return std::to_string(code);
  return std::string(DTypeName(static_cast<DType>(code)));
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
  if (config.checkpoint_every < 1 || (config.resume && config.checkpoint.empty())) {
    return InvalidArgument("need checkpoint_every >= 1, and a checkpoint to resume from");
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

  // The weights the next step reads: values at first, then futures of the last step.
  std::vector<Input> weights = {init.w1, init.b1, init.w2, init.b2};
  MlpResult result{init, 1, {}, {}};
  // The state a resume needs: the f32 (master) weights, whatever the precision, the step,
  // and the precision, which a resume must share to go on as the saved run would have.
  const std::vector<std::string> names = {"w1", "b1", "w2", "b2", "step", "precision"};
  const Tensor precision = Tensor::I32({}, {static_cast<int32_t>(config.precision)});
  std::optional<Run> run;  // the last step's, or the checkpoint's: its results 0-3 are the weights
  if (config.resume) {
    ATOLL_ASSIGN_OR_RETURN(Checkpoint saved,
                           client.Load(config.checkpoint, slice, {.names = names}));
    ATOLL_ASSIGN_OR_RETURN(const Tensor last, saved.run.Wait(4, config.step_timeout));
    ATOLL_ASSIGN_OR_RETURN(const Tensor saved_precision, saved.run.Wait(5, config.step_timeout));
    if (saved_precision != precision) {
      return InvalidArgument(fmt::format(
          "checkpoint '{}' is of a run in precision {}; resume it in that precision, not {}",
          config.checkpoint, PrecisionName(saved_precision), DTypeName(config.precision)));
    }
    result.first_step = last.as<int32_t>()[0] + 1;
    for (size_t i = 0; i < weights.size(); ++i) weights[i] = saved.run.Output(i);
    run = std::move(saved.run);
  }
  const auto start = std::chrono::steady_clock::now();
  for (int s = result.first_step; s <= config.steps; ++s) {
    const auto step_start = std::chrono::steady_clock::now();
    MlpBatch batch = MakeMlpBatch(config, s);
    ATOLL_ASSIGN_OR_RETURN(
        run, client.Submit(program, {std::move(batch.x), std::move(batch.labels), weights[0],
                                     weights[1], weights[2], weights[3]}));
    auto loss = run->Wait(4, config.step_timeout);
    if (!loss.ok()) return loss.status().WithContext(fmt::format("step {}", s));
    for (size_t i = 0; i < weights.size(); ++i) weights[i] = run->Output(i);
    result.losses.push_back(loss->as<float>()[0]);
    const bool save =
        !config.checkpoint.empty() && (s % config.checkpoint_every == 0 || s == config.steps);
    if (save) {
      std::vector<std::pair<std::string, Input>> tensors;
      for (size_t i = 0; i < weights.size(); ++i) tensors.emplace_back(names[i], weights[i]);
      tensors.emplace_back("step", Tensor::I32({}, {s}));
      tensors.emplace_back("precision", precision);
      ATOLL_RETURN_IF_ERROR(client.Save(tensors, config.checkpoint)
                                .WithContext(fmt::format("step {}: checkpoint", s)));
    }
    if (on_step) {
      on_step({s, result.losses.back(), std::chrono::steady_clock::now() - step_start, save});
    }
  }
  result.elapsed = std::chrono::steady_clock::now() - start;
  if (run) {
    std::vector<Tensor> last;
    for (size_t i = 0; i < weights.size(); ++i) {
      ATOLL_ASSIGN_OR_RETURN(Tensor w, run->Wait(i, config.step_timeout));
      last.push_back(std::move(w));
    }
    result.params = {std::move(last[0]), std::move(last[1]), std::move(last[2]),
                     std::move(last[3])};
  }
  return result;
}

}  // namespace atl::examples
