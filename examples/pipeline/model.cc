#include "examples/pipeline/model.h"

#include <cmath>
#include <deque>
#include <random>

#include <fmt/format.h>

#include "atoll/function.h"
#include "atoll/program.h"
#include "examples/common/uniform.h"

namespace atl::examples {

namespace {

// `v` once the device has been kept busy for `micros` (none when 0).
Value Modelled(FunctionBuilder& b, Value v, double micros) {
  return micros > 0 ? b.Spin(v, micros) : v;
}

// A weight gradient as summed over the slice: with split rows each device holds its rows'
// partial sum.
Value Complete(FunctionBuilder& b, Value partial, const BlockLayout& layout) {
  return layout.split_rows ? b.AllReduceSum(partial) : partial;
}

// The block's backward pass, with the running gradient sums as inputs when `accumulate`.
// Recomputes z = x w1 rather than keeping it from the forward pass (as GPipe does).
FunctionBuilder BackwardBuilder(const PipelineConfig& c, const BlockLayout& layout,
                                bool accumulate) {
  const Sharding rows = layout.split_rows ? Sharding::Split(0) : Sharding::Replicated();
  const Sharding rep = Sharding::Replicated();
  FunctionBuilder b(accumulate ? "block_backward_accumulate" : "block_backward");
  // Inputs declared one statement each: their order is the function's argument order.
  const Value x = b.Input(DType::kF32, {layout.rows, c.width}, rows);
  const Value dy = b.Input(DType::kF32, {layout.rows, c.width}, rows);
  const Value w1 = b.Input(DType::kF32, {c.width, c.hidden}, rep);
  const Value w2 = b.Input(DType::kF32, {c.hidden, c.width}, rep);
  const Value z = b.Matmul(x, w1);
  const Value dz = b.GeluBackward(b.Matmul(dy, w2, false, true), z);
  Value dw1 = Complete(b, b.Matmul(x, dz, true, false), layout);
  Value dw2 = Complete(b, b.Matmul(b.Gelu(z), dy, true, false), layout);
  if (accumulate) {
    const Value g1 = b.Input(DType::kF32, {c.width, c.hidden}, rep);
    const Value g2 = b.Input(DType::kF32, {c.hidden, c.width}, rep);
    dw1 = b.Add(g1, dw1);
    dw2 = b.Add(g2, dw2);
  }
  b.Output(Modelled(b, b.Add(dy, b.Matmul(dz, w1, false, true)), layout.backward_us));
  b.Output(dw1);
  b.Output(dw2);
  return b;
}

// The cross-entropy head, adding its scaled loss to a running sum when `sum`.
FunctionBuilder HeadBuilder(const PipelineConfig& c, const BlockLayout& layout, bool sum) {
  const Sharding rows = layout.split_rows ? Sharding::Split(0) : Sharding::Replicated();
  FunctionBuilder b(sum ? "head_sum" : "head");
  const Value y = b.Input(DType::kF32, {layout.rows, c.width}, rows);
  const Value labels = b.Input(DType::kI32, {layout.rows}, rows);
  const auto ce = b.CrossEntropy(y, labels);
  // With split rows each device holds its rows' share of the mean.
  Value loss = b.Mul(layout.split_rows ? b.AllReduceSum(ce.loss) : ce.loss, layout.loss_scale);
  if (sum) loss = b.Add(b.Input(DType::kF32, {}, Sharding::Replicated()), loss);
  b.Output(loss);
  b.Output(ce.dlogits);
  return b;
}

}  // namespace

Result<BlockFunctions> RegisterBlock(Client& client, const Slice& slice, const PipelineConfig& c,
                                     const BlockLayout& layout) {
  const Sharding rows = layout.split_rows ? Sharding::Split(0) : Sharding::Replicated();
  const Sharding rep = Sharding::Replicated();
  BlockFunctions f;
  {
    FunctionBuilder b("block_forward");
    const Value x = b.Input(DType::kF32, {layout.rows, c.width}, rows);
    const Value w1 = b.Input(DType::kF32, {c.width, c.hidden}, rep);
    const Value w2 = b.Input(DType::kF32, {c.hidden, c.width}, rep);
    b.Output(Modelled(b, b.Add(x, b.Matmul(b.Gelu(b.Matmul(x, w1)), w2)), layout.forward_us));
    ATOLL_ASSIGN_OR_RETURN(f.forward, client.Register(b, slice));
  }
  ATOLL_ASSIGN_OR_RETURN(f.backward, client.Register(BackwardBuilder(c, layout, false), slice));
  ATOLL_ASSIGN_OR_RETURN(f.accumulate, client.Register(BackwardBuilder(c, layout, true), slice));
  {
    FunctionBuilder b("sgd");
    const Value w1 = b.Input(DType::kF32, {c.width, c.hidden}, rep);
    const Value w2 = b.Input(DType::kF32, {c.hidden, c.width}, rep);
    const Value g1 = b.Input(DType::kF32, {c.width, c.hidden}, rep);
    const Value g2 = b.Input(DType::kF32, {c.hidden, c.width}, rep);
    b.Output(b.SgdUpdate(w1, g1, layout.learning_rate));
    b.Output(b.SgdUpdate(w2, g2, layout.learning_rate));
    ATOLL_ASSIGN_OR_RETURN(f.update, client.Register(b, slice));
  }
  ATOLL_ASSIGN_OR_RETURN(f.head, client.Register(HeadBuilder(c, layout, false), slice));
  ATOLL_ASSIGN_OR_RETURN(f.head_sum, client.Register(HeadBuilder(c, layout, true), slice));
  return f;
}

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

Traced Output(const std::vector<Traced>& outputs, size_t i) {
  return i < outputs.size() ? outputs[i] : Traced{};
}

Result<PipelineResult> Train(Client& client, const Program& step_program, const PipelineConfig& c,
                             const std::function<std::vector<Tensor>(int step)>& data,
                             const std::function<void(const PipelineStep&)>& on_step) {
  const size_t num_params = 2 * static_cast<size_t>(c.stages);
  std::vector<Input> params;
  std::mt19937 rng(c.seed);
  for (int s = 0; s < c.stages; ++s) {
    params.emplace_back(Uniform(rng, {c.width, c.hidden}, 1.0f / std::sqrt(float(c.width))));
    // Small second layers: every block starts close to the identity, as residual nets do.
    params.emplace_back(Uniform(rng, {c.hidden, c.width}, 0.1f / std::sqrt(float(c.hidden))));
  }
  std::deque<Run> in_flight;
  auto submit = [&](int step) -> Status {
    std::vector<Input> args = params;
    for (Tensor& t : data(step)) args.emplace_back(std::move(t));
    ATOLL_ASSIGN_OR_RETURN(Run run, client.Submit(step_program, args));
    for (size_t i = 0; i < num_params; ++i) params[i] = run.Output(i);
    in_flight.push_back(std::move(run));
    return Status::Ok();
  };

  PipelineResult result;
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  ATOLL_RETURN_IF_ERROR(submit(1));
  for (int step = 1; step <= c.steps; ++step) {
    if (step < c.steps) ATOLL_RETURN_IF_ERROR(submit(step + 1));
    auto loss = in_flight.front().Wait(num_params, c.step_timeout);
    if (!loss.ok()) return loss.status().WithContext(fmt::format("step {}", step));
    result.losses.push_back(loss->as<float>()[0]);
    const auto now = std::chrono::steady_clock::now();
    if (on_step) on_step({step, result.losses.back(), now - last});
    last = now;
    if (step < c.steps) in_flight.pop_front();  // the next run holds what it reads
  }
  result.elapsed = std::chrono::steady_clock::now() - start;
  for (size_t i = 0; i < num_params; ++i) {
    auto param = in_flight.front().Wait(i, c.step_timeout);
    if (!param.ok()) return param.status().WithContext("final weights");
    result.params.push_back(std::move(param).value());
  }
  return result;
}

}  // namespace atl::examples
