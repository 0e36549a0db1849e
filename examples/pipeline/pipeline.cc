#include "examples/pipeline/pipeline.h"

#include <cmath>
#include <random>

#include <fmt/format.h>

#include "atoll/function.h"
#include "atoll/program.h"
#include "examples/common/uniform.h"

namespace atl::examples {

namespace {

// The functions one stage runs, compiled on its slice.
struct StageFunctions {
  Function forward;   // (x, w1, w2) -> x + gelu(x w1) w2
  Function backward;  // (x, dy, w1, w2) -> dx, dw1, dw2
  Function add;       // (a, b) -> a + b, per weight shape: [width,hidden] and [hidden,width]
  Function add_t;
  Function sgd;  // (w, g) -> w - lr/M g, per weight shape
  Function sgd_t;
  Function head;  // (y, labels) -> mean cross-entropy, dy
};

Result<StageFunctions> RegisterStage(Client& client, const Slice& slice, const PipelineConfig& c) {
  const Shape act = {c.micro_batch, c.width};
  const Shape w1_shape = {c.width, c.hidden};
  const Shape w2_shape = {c.hidden, c.width};
  const Sharding rep = Sharding::Replicated();
  StageFunctions f;
  {
    FunctionBuilder b("block_forward");
    const Value x = b.Input(DType::kF32, act, rep);
    const Value w1 = b.Input(DType::kF32, w1_shape, rep);
    const Value w2 = b.Input(DType::kF32, w2_shape, rep);
    b.Output(b.Add(x, b.Matmul(b.Gelu(b.Matmul(x, w1)), w2)));
    ATOLL_ASSIGN_OR_RETURN(f.forward, client.Register(b, slice));
  }
  {
    // Recomputes z = x w1 rather than keeping it from the forward pass (as GPipe does).
    FunctionBuilder b("block_backward");
    const Value x = b.Input(DType::kF32, act, rep);
    const Value dy = b.Input(DType::kF32, act, rep);
    const Value w1 = b.Input(DType::kF32, w1_shape, rep);
    const Value w2 = b.Input(DType::kF32, w2_shape, rep);
    const Value z = b.Matmul(x, w1);
    const Value dz = b.GeluBackward(b.Matmul(dy, w2, false, true), z);
    b.Output(b.Add(dy, b.Matmul(dz, w1, false, true)));
    b.Output(b.Matmul(x, dz, true, false));
    b.Output(b.Matmul(b.Gelu(z), dy, true, false));
    ATOLL_ASSIGN_OR_RETURN(f.backward, client.Register(b, slice));
  }
  const double lr = c.learning_rate / c.micro_batches;  // the step's loss is the mean
  for (const auto& [shape, add, sgd] :
       {std::tuple{w1_shape, &f.add, &f.sgd}, std::tuple{w2_shape, &f.add_t, &f.sgd_t}}) {
    // Inputs declared one statement each: their order is the functions' argument order.
    FunctionBuilder a("grad_add");
    const Value x = a.Input(DType::kF32, shape, rep);
    const Value y = a.Input(DType::kF32, shape, rep);
    a.Output(a.Add(x, y));
    ATOLL_ASSIGN_OR_RETURN(*add, client.Register(a, slice));
    FunctionBuilder s("sgd");
    const Value w = s.Input(DType::kF32, shape, rep);
    const Value g = s.Input(DType::kF32, shape, rep);
    s.Output(s.SgdUpdate(w, g, lr));
    ATOLL_ASSIGN_OR_RETURN(*sgd, client.Register(s, slice));
  }
  {
    FunctionBuilder b("head");
    const Value y = b.Input(DType::kF32, act, rep);
    const Value labels = b.Input(DType::kI32, {c.micro_batch}, rep);
    const auto ce = b.CrossEntropy(y, labels);
    b.Output(ce.loss);
    b.Output(ce.dlogits);
    ATOLL_ASSIGN_OR_RETURN(f.head, client.Register(b, slice));
  }
  return f;
}

// Micro-batch m of step `step`: inputs and labels from a fixed random teacher.
std::pair<Tensor, Tensor> MicroBatch(const PipelineConfig& c, int step, int m) {
  std::mt19937 teacher_rng(c.seed ^ 0x7eac4e7u);
  const Tensor teacher = Uniform(teacher_rng, {c.width, c.width}, 1.0f);
  std::mt19937 rng(c.seed * 7919u + static_cast<uint32_t>(step * 1000 + m));
  Tensor x = Uniform(rng, {c.micro_batch, c.width}, 1.0f);
  Tensor labels(DType::kI32, {c.micro_batch});
  for (int64_t i = 0; i < c.micro_batch; ++i) {
    double best = -1e30;
    for (int64_t j = 0; j < c.width; ++j) {
      double score = 0;
      for (int64_t k = 0; k < c.width; ++k) {
        score += x.as<float>()[i * c.width + k] * teacher.as<float>()[k * c.width + j];
      }
      if (score > best) {
        best = score;
        labels.as<int32_t>()[i] = static_cast<int32_t>(j);
      }
    }
  }
  return {std::move(x), std::move(labels)};
}

// Output `i` of a traced call; a call the tracer refused has none, and Build() says why.
Traced Output(const std::vector<Traced>& outputs, size_t i) {
  return i < outputs.size() ? outputs[i] : Traced{};
}

// One training step as one program. Arguments: w1, w2 per stage, then x and labels per
// micro-batch. Results: the new w1, w2 per stage, then each micro-batch's loss.
Result<Program> TraceStep(const std::vector<StageFunctions>& stages, const PipelineConfig& c) {
  ProgramBuilder p;
  const int S = c.stages;
  std::vector<Traced> w1(S), w2(S), g1(S), g2(S);
  for (int s = 0; s < S; ++s) {
    w1[s] = p.Arg(DType::kF32, {c.width, c.hidden});
    w2[s] = p.Arg(DType::kF32, {c.hidden, c.width});
  }
  std::vector<Traced> losses;
  for (int m = 0; m < c.micro_batches; ++m) {
    std::vector<Traced> acts = {p.Arg(DType::kF32, {c.micro_batch, c.width})};
    const Traced labels = p.Arg(DType::kI32, {c.micro_batch});
    for (int s = 0; s < S; ++s)
      acts.push_back(Output(p.Call(stages[s].forward, {acts[s], w1[s], w2[s]}), 0));
    const auto head = p.Call(stages[S - 1].head, {acts[S], labels});
    losses.push_back(Output(head, 0));
    Traced dy = Output(head, 1);
    for (int s = S - 1; s >= 0; --s) {
      const auto grads = p.Call(stages[s].backward, {acts[s], dy, w1[s], w2[s]});
      dy = Output(grads, 0);
      g1[s] =
          m == 0 ? Output(grads, 1) : Output(p.Call(stages[s].add, {g1[s], Output(grads, 1)}), 0);
      g2[s] =
          m == 0 ? Output(grads, 2) : Output(p.Call(stages[s].add_t, {g2[s], Output(grads, 2)}), 0);
    }
  }
  std::vector<Traced> results;
  for (int s = 0; s < S; ++s) {
    results.push_back(Output(p.Call(stages[s].sgd, {w1[s], g1[s]}), 0));
    results.push_back(Output(p.Call(stages[s].sgd_t, {w2[s], g2[s]}), 0));
  }
  results.insert(results.end(), losses.begin(), losses.end());
  p.Return(results);
  return p.Build();
}

}  // namespace

Result<PipelineResult> TrainPipeline(Client& client, const std::vector<Slice>& slices,
                                     const PipelineConfig& c,
                                     const std::function<void(const PipelineStep&)>& on_step) {
  if (c.stages < 1 || c.micro_batches < 1 || c.steps < 1 ||
      slices.size() != static_cast<size_t>(c.stages)) {
    return InvalidArgument(
        fmt::format("need stages, micro-batches, steps >= 1 and one slice per "
                    "stage ({} slices for {} stages)",
                    slices.size(), c.stages));
  }
  std::vector<StageFunctions> stages;
  for (const Slice& slice : slices) {
    auto registered = RegisterStage(client, slice, c);
    if (!registered.ok())
      return registered.status().WithContext(fmt::format("stage {}", stages.size()));
    stages.push_back(std::move(registered).value());
  }
  ATOLL_ASSIGN_OR_RETURN(Program program, TraceStep(stages, c));

  PipelineResult result;
  std::mt19937 rng(c.seed);
  for (int s = 0; s < c.stages; ++s) {
    result.params.push_back(Uniform(rng, {c.width, c.hidden}, 1.0f / std::sqrt(float(c.width))));
    // Small second layers: every block starts close to the identity, as residual nets do.
    result.params.push_back(Uniform(rng, {c.hidden, c.width}, 0.1f / std::sqrt(float(c.hidden))));
  }
  const auto start = std::chrono::steady_clock::now();
  for (int step = 1; step <= c.steps; ++step) {
    const auto step_start = std::chrono::steady_clock::now();
    std::vector<Input> args(result.params.begin(), result.params.end());
    for (int m = 0; m < c.micro_batches; ++m) {
      auto [x, labels] = MicroBatch(c, step, m);
      args.emplace_back(std::move(x));
      args.emplace_back(std::move(labels));
    }
    ATOLL_ASSIGN_OR_RETURN(Run run, client.Submit(program, args));
    auto outputs = run.Wait(c.step_timeout);
    if (!outputs.ok()) return outputs.status().WithContext(fmt::format("step {}", step));
    double loss = 0;
    for (int m = 0; m < c.micro_batches; ++m) loss += (*outputs)[2 * c.stages + m].as<float>()[0];
    outputs->resize(2 * c.stages);
    result.params = std::move(outputs).value();
    result.losses.push_back(loss / c.micro_batches);
    if (on_step)
      on_step({step, result.losses.back(), std::chrono::steady_clock::now() - step_start});
  }
  result.elapsed = std::chrono::steady_clock::now() - start;
  return result;
}

}  // namespace atl::examples
