#include "examples/pipeline/data_parallel.h"

#include <algorithm>

#include <fmt/format.h>

#include "atoll/program.h"

namespace atl::examples {

namespace {

// One training step as one program. Arguments: w1, w2 per block, then the step's x and
// labels (all rows). Results: the new w1, w2 per block, then the step's mean loss.
Result<Program> TraceStep(const BlockFunctions& f, const PipelineConfig& c, int64_t rows) {
  ProgramBuilder p;
  const int S = c.stages;
  std::vector<Traced> w1(S), w2(S);
  for (int s = 0; s < S; ++s) {
    w1[s] = p.Arg(DType::kF32, {c.width, c.hidden});
    w2[s] = p.Arg(DType::kF32, {c.hidden, c.width});
  }
  std::vector<Traced> acts = {p.Arg(DType::kF32, {rows, c.width})};
  const Traced labels = p.Arg(DType::kI32, {rows});
  for (int s = 0; s < S; ++s) acts.push_back(Output(p.Call(f.forward, {acts[s], w1[s], w2[s]}), 0));
  const auto head = p.Call(f.head, {acts[S], labels});
  Traced dy = Output(head, 1);
  std::vector<Traced> results(2 * S);
  for (int s = S - 1; s >= 0; --s) {
    const auto grads = p.Call(f.backward, {acts[s], w1[s], w2[s], dy});
    dy = Output(grads, 0);
    const auto updated = p.Call(f.update, {w1[s], w2[s], Output(grads, 1), Output(grads, 2)});
    results[2 * s] = Output(updated, 0);
    results[2 * s + 1] = Output(updated, 1);
  }
  results.push_back(Output(head, 0));
  p.Return(results);
  return p.Build();
}

// The micro-batches of a step, stacked: the pipeline's batch, in its order.
std::vector<Tensor> StepBatch(const PipelineConfig& c, int step) {
  Tensor x(DType::kF32, {c.micro_batch * c.micro_batches, c.width});
  Tensor labels(DType::kI32, {c.micro_batch * c.micro_batches});
  for (int m = 0; m < c.micro_batches; ++m) {
    auto [mx, mlabels] = MicroBatch(c, step, m);
    std::copy(mx.as<float>().begin(), mx.as<float>().end(),
              x.as<float>().begin() + m * c.micro_batch * c.width);
    std::copy(mlabels.as<int32_t>().begin(), mlabels.as<int32_t>().end(),
              labels.as<int32_t>().begin() + m * c.micro_batch);
  }
  return {std::move(x), std::move(labels)};
}

}  // namespace

Result<PipelineResult> TrainDataParallel(Client& client, const Slice& slice,
                                         const PipelineConfig& c,
                                         const std::function<void(const PipelineStep&)>& on_step) {
  const int64_t rows = c.micro_batch * c.micro_batches;
  const int devices = slice.num_devices();
  if (c.stages < 1 || c.micro_batches < 1 || c.steps < 1 || devices < 1 || rows % devices != 0) {
    return InvalidArgument(
        fmt::format("need stages, micro-batches, steps >= 1 and a slice whose {} devices "
                    "divide the step's {} rows",
                    devices, rows));
  }
  const double share = static_cast<double>(c.micro_batches) / devices;
  BlockLayout layout;
  layout.rows = rows;
  layout.split_rows = true;
  layout.forward_us = c.forward_us * share;
  layout.backward_us = c.backward_us * share;
  layout.learning_rate = c.learning_rate;  // the all-reduced gradients are the mean's
  ATOLL_ASSIGN_OR_RETURN(BlockFunctions f, RegisterBlock(client, slice, c, layout));
  ATOLL_ASSIGN_OR_RETURN(Program program, TraceStep(f, c, rows));
  return Train(
      client, program, c, [&c](int step) { return StepBatch(c, step); }, on_step);
}

}  // namespace atl::examples
