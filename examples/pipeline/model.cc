#include "examples/pipeline/model.h"

#include <cmath>
#include <deque>
#include <random>

#include <fmt/format.h>

#include "atoll/function.h"
#include "atoll/grad.h"
#include "atoll/program.h"
#include "examples/common/uniform.h"

namespace atl::examples {

namespace {

// `v` once the device has been kept busy for `micros` (none when 0).
Value Modelled(FunctionBuilder& b, Value v, double micros) {
  return micros > 0 ? b.Spin(v, micros) : v;
}

Sharding RowsOf(const BlockLayout& layout) {
  return layout.split_rows ? Sharding::Split(0) : Sharding::Replicated();
}

}  // namespace

FunctionBuilder BlockForward(const PipelineConfig& c, const BlockLayout& layout) {
  FunctionBuilder b("block_forward");
  // Inputs declared one statement each: their order is the function's argument order.
  const Value x = b.Input(DType::kF32, {layout.rows, c.width}, RowsOf(layout));
  const Value w1 = b.Input(DType::kF32, {c.width, c.hidden}, Sharding::Replicated());
  const Value w2 = b.Input(DType::kF32, {c.hidden, c.width}, Sharding::Replicated());
  b.Output(b.Add(x, b.Matmul(b.Gelu(b.Matmul(x, w1)), w2)));
  return b;
}

Result<FunctionBuilder> BlockBackward(const PipelineConfig& c, const BlockLayout& layout,
                                      bool accumulate) {
  // The vector-Jacobian product: it recomputes the forward pass it needs (as GPipe does),
  // and all-reduces the weight gradients when the rows are split.
  ATOLL_ASSIGN_OR_RETURN(const FunctionBuilder vjp,
                         Grad(BlockForward(c, layout), {0, 1, 2}, {.cotangents = true}));
  FunctionBuilder b(accumulate ? "block_backward_accumulate" : "block_backward");
  const Shape rows = {layout.rows, c.width};
  const Value x = b.Input(DType::kF32, rows, RowsOf(layout));
  const Value w1 = b.Input(DType::kF32, {c.width, c.hidden}, Sharding::Replicated());
  const Value w2 = b.Input(DType::kF32, {c.hidden, c.width}, Sharding::Replicated());
  const Value dy = b.Input(DType::kF32, rows, RowsOf(layout));
  std::vector<Value> grads = b.Call(vjp, {x, w1, w2, dy});
  if (!b.status().ok()) return b.status();
  if (accumulate) {
    grads[1] = b.Add(b.Input(DType::kF32, {c.width, c.hidden}, Sharding::Replicated()), grads[1]);
    grads[2] = b.Add(b.Input(DType::kF32, {c.hidden, c.width}, Sharding::Replicated()), grads[2]);
  }
  b.Output(Modelled(b, grads[0], layout.backward_us));
  b.Output(grads[1]);
  b.Output(grads[2]);
  return b;
}

FunctionBuilder HeadLoss(const PipelineConfig& c, const BlockLayout& layout) {
  FunctionBuilder b("head_loss");
  const Value y = b.Input(DType::kF32, {layout.rows, c.width}, RowsOf(layout));
  const Value labels = b.Input(DType::kI32, {layout.rows}, RowsOf(layout));
  const Value loss = b.CrossEntropy(y, labels).loss;
  // With split rows each device holds its rows' share of the mean.
  b.Output(b.Mul(layout.split_rows ? b.AllReduceSum(loss) : loss, layout.loss_scale));
  return b;
}

Result<FunctionBuilder> Head(const PipelineConfig& c, const BlockLayout& layout, bool sum) {
  ATOLL_ASSIGN_OR_RETURN(const FunctionBuilder loss_and_dy, ValueAndGrad(HeadLoss(c, layout), {0}));
  FunctionBuilder b(sum ? "head_sum" : "head");
  const Value y = b.Input(DType::kF32, {layout.rows, c.width}, RowsOf(layout));
  const Value labels = b.Input(DType::kI32, {layout.rows}, RowsOf(layout));
  std::vector<Value> out = b.Call(loss_and_dy, {y, labels});
  if (!b.status().ok()) return b.status();
  if (sum) out[0] = b.Add(b.Input(DType::kF32, {}, Sharding::Replicated()), out[0]);
  b.Output(out[0]);
  b.Output(out[1]);
  return b;
}

Result<BlockFunctions> RegisterBlock(Client& client, const Slice& slice, const PipelineConfig& c,
                                     const BlockLayout& layout) {
  const Sharding rep = Sharding::Replicated();
  BlockFunctions f;
  {
    FunctionBuilder b("block_forward");
    const Value x = b.Input(DType::kF32, {layout.rows, c.width}, RowsOf(layout));
    const Value w1 = b.Input(DType::kF32, {c.width, c.hidden}, rep);
    const Value w2 = b.Input(DType::kF32, {c.hidden, c.width}, rep);
    const std::vector<Value> y = b.Call(BlockForward(c, layout), {x, w1, w2});
    if (!b.status().ok()) return b.status();
    b.Output(Modelled(b, y[0], layout.forward_us));
    ATOLL_ASSIGN_OR_RETURN(f.forward, client.Register(b, slice));
  }
  ATOLL_ASSIGN_OR_RETURN(const FunctionBuilder backward, BlockBackward(c, layout, false));
  ATOLL_ASSIGN_OR_RETURN(f.backward, client.Register(backward, slice));
  ATOLL_ASSIGN_OR_RETURN(const FunctionBuilder accumulate, BlockBackward(c, layout, true));
  ATOLL_ASSIGN_OR_RETURN(f.accumulate, client.Register(accumulate, slice));
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
  ATOLL_ASSIGN_OR_RETURN(const FunctionBuilder head, Head(c, layout, false));
  ATOLL_ASSIGN_OR_RETURN(f.head, client.Register(head, slice));
  ATOLL_ASSIGN_OR_RETURN(const FunctionBuilder head_sum, Head(c, layout, true));
  ATOLL_ASSIGN_OR_RETURN(f.head_sum, client.Register(head_sum, slice));
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
