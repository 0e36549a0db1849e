#include "examples/pipeline/pipeline.h"

#include <fmt/format.h>

#include "atoll/program.h"

namespace atl::examples {

namespace {

// One training step as one program. Arguments: w1, w2 per stage, then x and labels per
// micro-batch. Results: the new w1, w2 per stage, then the step's mean loss.
// Every device runs its calls in the order traced, so the trace is GPipe's schedule: all
// micro-batches forward, then all backward (a stage's backward of micro-batch 0 traced
// before its forward of micro-batch 1 would hold that device until micro-batch 0 came
// back from the last stage).
Result<Program> TraceStep(const std::vector<BlockFunctions>& stages, const PipelineConfig& c) {
  ProgramBuilder p;
  const int S = c.stages;
  const int M = c.micro_batches;
  std::vector<Traced> w1(S), w2(S), g1(S), g2(S);
  for (int s = 0; s < S; ++s) {
    w1[s] = p.Arg(DType::kF32, {c.width, c.hidden});
    w2[s] = p.Arg(DType::kF32, {c.hidden, c.width});
  }
  // acts[m][s]: micro-batch m's input to stage s; dys[m]: the loss's gradient for it.
  std::vector<std::vector<Traced>> acts(M);
  std::vector<Traced> dys(M);
  const BlockFunctions& last = stages[S - 1];
  Traced loss;
  for (int m = 0; m < M; ++m) {
    acts[m] = {p.Arg(DType::kF32, {c.micro_batch, c.width})};
    const Traced labels = p.Arg(DType::kI32, {c.micro_batch});
    for (int s = 0; s < S; ++s)
      acts[m].push_back(Output(p.Call(stages[s].forward, {acts[m][s], w1[s], w2[s]}), 0));
    const auto head = m == 0 ? p.Call(last.head, {acts[m][S], labels})
                             : p.Call(last.head_sum, {acts[m][S], labels, loss});
    loss = Output(head, 0);
    dys[m] = Output(head, 1);
  }
  for (int m = 0; m < M; ++m) {
    Traced dy = dys[m];
    for (int s = S - 1; s >= 0; --s) {
      const auto grads =
          m == 0 ? p.Call(stages[s].backward, {acts[m][s], w1[s], w2[s], dy})
                 : p.Call(stages[s].accumulate, {acts[m][s], w1[s], w2[s], dy, g1[s], g2[s]});
      dy = Output(grads, 0);
      g1[s] = Output(grads, 1);
      g2[s] = Output(grads, 2);
    }
  }
  std::vector<Traced> results;
  for (int s = 0; s < S; ++s) {
    const auto updated = p.Call(stages[s].update, {w1[s], w2[s], g1[s], g2[s]});
    results.push_back(Output(updated, 0));
    results.push_back(Output(updated, 1));
  }
  results.push_back(loss);
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
  BlockLayout layout;
  layout.rows = c.micro_batch;
  layout.forward_us = c.forward_us;
  layout.backward_us = c.backward_us;
  // The step's loss is the mean over its micro-batches: each head's is 1/M of its own, so
  // the gradients summed over the micro-batches are the step's.
  layout.loss_scale = 1.0 / c.micro_batches;
  layout.learning_rate = c.learning_rate;
  std::vector<BlockFunctions> stages;
  for (const Slice& slice : slices) {
    auto registered = RegisterBlock(client, slice, c, layout);
    if (!registered.ok())
      return registered.status().WithContext(fmt::format("stage {}", stages.size()));
    stages.push_back(std::move(registered).value());
  }
  ATOLL_ASSIGN_OR_RETURN(Program program, TraceStep(stages, c));
  auto data = [&c](int step) {
    std::vector<Tensor> args;
    for (int m = 0; m < c.micro_batches; ++m) {
      auto [x, labels] = MicroBatch(c, step, m);
      args.push_back(std::move(x));
      args.push_back(std::move(labels));
    }
    return args;
  };
  return Train(client, program, c, data, on_step);
}

}  // namespace atl::examples
