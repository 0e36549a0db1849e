#include "examples/tensor_parallel/tensor_parallel.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include <fmt/format.h>

#include "atoll/program.h"
#include "examples/common/uniform.h"

namespace atl::examples {

namespace {

constexpr int kData = 0;   // the mesh axis the batch (and Adam's state) is cut along
constexpr int kModel = 1;  // the mesh axis each block's hidden layer is cut along

// A trained tensor as the step lays it out: cut along the model axis as `layout` says for
// the passes; with `zero_dim` >= 0, its master copy and Adam's moments are cut along the
// data axis on that dimension too (ZeRO-1). b1 is cut along the model axis already, on its
// only dimension: its Adam state stays whole there (it is small, as biases are).
struct Param {
  Shape shape;
  std::vector<int> layout;
  int zero_dim;
};

// A block's params in BlockWeights' order: w1, b1, w2, b2.
std::vector<Param> BlockParams(const TensorParallelConfig& c) {
  return {{{c.width, c.hidden}, {-1, kModel}, 0},
          {{c.hidden}, {kModel}, -1},
          {{c.hidden, c.width}, {kModel, -1}, 1},
          {{c.width}, {-1}, 0}};
}

// What a param keeps between steps: its weights, then with ZeRO its shard (the master
// copy), then Adam's m and v, laid out like the shard (or like the weights).
struct ParamState {
  Value weights;
  Value shard;
  Value m;
  Value v;
};

std::vector<int> StateLayout(const Param& p) {
  std::vector<int> layout = p.layout;
  if (p.zero_dim >= 0) layout[p.zero_dim] = kData;
  return layout;
}

ParamState StateInputs(FunctionBuilder& b, const Param& p) {
  ParamState s;
  s.weights = b.Input(DType::kF32, p.shape, Sharding::Axes(p.layout));
  const Sharding state = Sharding::Axes(StateLayout(p));
  if (p.zero_dim >= 0) s.shard = b.Input(DType::kF32, p.shape, state);
  s.m = b.Input(DType::kF32, p.shape, state);
  s.v = b.Input(DType::kF32, p.shape, state);
  return s;
}

// Adam on `grad` (each device's partial over its rows of the batch), outputs in the order of
// StateInputs. With ZeRO: the gradient reduce-scattered over the data axis, the shard
// updated, the weights all-gathered; else the gradient all-reduced and the weights updated.
void OutputUpdate(FunctionBuilder& b, const Param& p, const ParamState& s, Value grad, Value step,
                  const AdamOptions& adam) {
  if (p.zero_dim < 0) {
    const auto u = b.AdamUpdate(s.weights, b.AllReduceSum(grad, kData), s.m, s.v, step, adam);
    b.Output(u.param);
    b.Output(u.m);
    b.Output(u.v);
    return;
  }
  const auto u =
      b.AdamUpdate(s.shard, b.ReduceScatter(grad, kData, p.zero_dim), s.m, s.v, step, adam);
  b.Output(b.AllGather(u.param, kData));
  b.Output(u.param);
  b.Output(u.m);
  b.Output(u.v);
}

// One training step of the block stack under softmax cross-entropy (the last block's output
// is the logits). Inputs: x [batch, width] and labels (rows cut along the data axis), the
// step (i32 []), then each block's params' state. Outputs: the params' new state in the same
// order, then the loss before the update.
FunctionBuilder TrainStep(const TensorParallelConfig& c) {
  FunctionBuilder b("tensor_parallel_train_step");
  const std::vector<Param> params = BlockParams(c);
  Value x = b.Input(DType::kF32, {c.batch, c.width}, Sharding::Axes({kData, -1}));
  const Value labels = b.Input(DType::kI32, {c.batch}, Sharding::Axes({kData}));
  const Value step = b.Input(DType::kI32, {}, Sharding::Replicated());
  std::vector<std::vector<ParamState>> state(c.blocks);
  for (auto& block : state) {
    for (const Param& p : params) block.push_back(StateInputs(b, p));
  }

  // Forward. A block's first matmul gives each device its columns of the hidden layer (no
  // communication); its second gives each device a partial sum of the output, which one
  // all-reduce over the model axis completes.
  std::vector<Value> inputs, pre_gelu, hidden;
  for (const auto& w : state) {
    inputs.push_back(x);
    pre_gelu.push_back(b.BiasAdd(b.Matmul(x, w[0].weights), w[1].weights));
    hidden.push_back(b.Gelu(pre_gelu.back()));
    const Value out = b.AllReduceSum(b.Matmul(hidden.back(), w[2].weights), kModel);
    x = b.Add(x, b.BiasAdd(out, w[3].weights));
  }
  const auto ce = b.CrossEntropy(x, labels);

  // Backward. Every weight gradient is a partial over the data axis (a sum over each device's
  // rows); the gradient of a block's input is a partial over the model axis (a sum over each
  // device's hidden columns), completed by the mirror all-reduce.
  std::vector<std::vector<Value>> grads(c.blocks, std::vector<Value>(params.size()));
  Value dx = ce.dlogits;
  for (int l = c.blocks - 1; l >= 0; --l) {
    const auto& w = state[l];
    grads[l][3] = b.ReduceSum(dx, 0);
    grads[l][2] = b.Matmul(hidden[l], dx, /*transpose_a=*/true, /*transpose_b=*/false);
    const Value dz = b.GeluBackward(b.Matmul(dx, w[2].weights, false, true), pre_gelu[l]);
    grads[l][1] = b.ReduceSum(dz, 0);
    grads[l][0] = b.Matmul(inputs[l], dz, true, false);
    if (l > 0) dx = b.Add(dx, b.AllReduceSum(b.Matmul(dz, w[0].weights, false, true), kModel));
  }

  for (int l = 0; l < c.blocks; ++l) {
    for (size_t i = 0; i < params.size(); ++i) {
      OutputUpdate(b, params[i], state[l][i], grads[l][i], step, c.adam);
    }
  }
  b.Output(b.AllReduceSum(ce.loss, kData));
  return b;
}

// Step `step`'s batch: fresh inputs each step, labelled by one random linear teacher for the
// whole run (the class of the largest score).
std::pair<Tensor, Tensor> MakeBatch(const TensorParallelConfig& c, int step) {
  std::mt19937 teacher_rng(c.seed ^ 0x7eac4e7u);
  const Tensor teacher = Uniform(teacher_rng, {c.width, c.width}, 1.0f);
  std::mt19937 rng(c.seed * 7919u + static_cast<uint32_t>(step));
  Tensor x = Uniform(rng, {c.batch, c.width}, 1.0f);
  Tensor labels(DType::kI32, {c.batch});
  const auto xs = x.as<float>();
  const auto t = teacher.as<float>();
  for (int64_t i = 0; i < c.batch; ++i) {
    std::vector<double> score(c.width);
    for (int64_t k = 0; k < c.width; ++k) {
      for (int64_t j = 0; j < c.width; ++j) score[j] += xs[i * c.width + k] * t[k * c.width + j];
    }
    labels.as<int32_t>()[i] =
        static_cast<int32_t>(std::max_element(score.begin(), score.end()) - score.begin());
  }
  return {std::move(x), std::move(labels)};
}

Status CheckSizes(const Slice& slice, const TensorParallelConfig& c) {
  const Shape& mesh = slice.mesh();
  if (mesh.size() != 2) {
    return InvalidArgument(
        fmt::format("the slice must be a 2-D mesh (data, model), not {}", ShapeString(mesh)));
  }
  const bool fits = c.steps >= 1 && c.blocks >= 1 && c.batch % mesh[kData] == 0 &&
                    c.width % mesh[kData] == 0 && c.hidden % mesh[kModel] == 0;
  if (fits) return Status::Ok();
  return InvalidArgument(
      fmt::format("need steps >= 1, blocks >= 1, a batch ({}) and width ({}) that divide over "
                  "the data axis ({} devices) and a hidden layer ({}) that divides over the "
                  "model axis ({} devices)",
                  c.batch, c.width, mesh[kData], c.hidden, mesh[kModel]));
}

}  // namespace

std::vector<BlockWeights> InitBlocks(const TensorParallelConfig& c) {
  std::mt19937 rng(c.seed);
  std::vector<BlockWeights> blocks;
  for (int l = 0; l < c.blocks; ++l) {
    blocks.push_back(
        {Uniform(rng, {c.width, c.hidden}, 1.0f / std::sqrt(static_cast<float>(c.width))),
         Tensor(DType::kF32, {c.hidden}),
         Uniform(rng, {c.hidden, c.width}, 1.0f / std::sqrt(static_cast<float>(c.hidden))),
         Tensor(DType::kF32, {c.width})});
  }
  return blocks;
}

Result<TensorParallelResult> TrainTensorParallel(
    Client& client, const Slice& slice, const TensorParallelConfig& c,
    const std::function<void(const TensorParallelStep&)>& on_step) {
  ATOLL_RETURN_IF_ERROR(CheckSizes(slice, c));
  const std::vector<Param> params = BlockParams(c);
  const FunctionBuilder builder = TrainStep(c);
  ATOLL_ASSIGN_OR_RETURN(Function step_fn, client.Register(builder, slice));

  // The state between steps: each param's weights (their first tensor, whose index is kept
  // to read the result), shard and moments; tensors at first, then the last run's futures.
  const std::vector<BlockWeights> init = InitBlocks(c);
  std::vector<Input> state;
  std::vector<size_t> weights_at;
  for (const BlockWeights& block : init) {
    const Tensor* values[] = {&block.w1, &block.b1, &block.w2, &block.b2};
    for (size_t i = 0; i < params.size(); ++i) {
      weights_at.push_back(state.size());
      state.emplace_back(*values[i]);
      if (params[i].zero_dim >= 0) state.emplace_back(*values[i]);  // the master copy
      state.emplace_back(Tensor(DType::kF32, params[i].shape));     // m
      state.emplace_back(Tensor(DType::kF32, params[i].shape));     // v
    }
  }
  ProgramBuilder p;
  std::vector<Traced> args = {p.Arg(DType::kF32, {c.batch, c.width}), p.Arg(DType::kI32, {c.batch}),
                              p.Arg(DType::kI32, {})};
  for (const Input& s : state) args.push_back(p.Arg(DType::kF32, s.value()->shape()));
  p.Return(p.Call(step_fn, args));
  ATOLL_ASSIGN_OR_RETURN(Program program, p.Build());

  TensorParallelResult result;
  const auto start = std::chrono::steady_clock::now();
  std::optional<Run> last;
  for (int s = 1; s <= c.steps; ++s) {
    const auto step_start = std::chrono::steady_clock::now();
    auto [x, labels] = MakeBatch(c, s);
    std::vector<Input> inputs = {std::move(x), std::move(labels), Tensor::I32({}, {s})};
    inputs.insert(inputs.end(), state.begin(), state.end());
    ATOLL_ASSIGN_OR_RETURN(Run run, client.Submit(program, inputs));
    auto loss = run.Wait(state.size(), c.step_timeout);
    if (!loss.ok()) return loss.status().WithContext(fmt::format("step {}", s));
    result.losses.push_back(loss->as<float>()[0]);
    for (size_t i = 0; i < state.size(); ++i) state[i] = run.Output(i);
    last = run;
    if (on_step) {
      on_step({s, result.losses.back(), std::chrono::steady_clock::now() - step_start});
    }
  }
  result.elapsed = std::chrono::steady_clock::now() - start;
  for (int l = 0; l < c.blocks; ++l) {
    std::vector<Tensor> w;
    for (size_t i = 0; i < params.size(); ++i) {
      auto read = last->Wait(weights_at[l * params.size() + i], c.step_timeout);
      if (!read.ok()) return read.status().WithContext("reading the weights");
      w.push_back(std::move(read).value());
    }
    result.weights.push_back({std::move(w[0]), std::move(w[1]), std::move(w[2]), std::move(w[3])});
  }
  return result;
}

}  // namespace atl::examples
