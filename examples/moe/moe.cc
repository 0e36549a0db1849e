#include "examples/moe/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "atoll/function.h"
#include "atoll/program.h"
#include "examples/common/uniform.h"

namespace atl::examples {

namespace {

// Outputs of the experts' forward function, per choice j of k: at j * kForwardOutputs + n.
enum ForwardOutput { kY, kIds, kHome, kX, kHidden, kActivation, kForwardOutputs };

// Where the program's results hold the gate's k choices: after loss, output and the six
// weights and moments.
constexpr size_t kChoices = 8;

// v [m] on every column of an [m,width] matrix, from existing ops: BiasAdd adds v to each
// row of a zero [width,m] (x's transpose times 0; x is finite), and Transpose turns that
// back. Row-wise, so it holds for rows cut over the slice too.
Value BroadcastOverColumns(FunctionBuilder& b, Value v, Value x) {
  return b.Transpose(b.BiasAdd(b.Mul(b.Transpose(x), 0.0), v));
}

// On the token slice: the gate. Scores each token against the experts (x wg), keeps the k
// best (TopK) and weighs them by the softmax of their k scores. Hands the tokens, their ids,
// their home shard (the token slice's shard that holds them, where their outputs go back)
// and their k choices to Route, which takes rows and destinations from one call, and the
// k gate weights, each on every column, to the combine.
FunctionBuilder Dispatch(const MoeConfig& c) {
  FunctionBuilder b("moe_dispatch");
  const Value x = b.Input(DType::kF32, {c.tokens, c.width});
  b.Output(x);
  b.Output(b.Input(DType::kI32, {c.tokens}));
  b.Output(b.Input(DType::kI32, {c.tokens}));
  const Value wg = b.Input(DType::kF32, {c.width, c.experts}, Sharding::Replicated());
  const auto best = b.TopK(b.Matmul(x, wg), c.top_k);
  const Value weights = b.Softmax(best.values);
  for (int j = 0; j < c.top_k; ++j) b.Output(b.Column(best.indices, j));
  for (int j = 0; j < c.top_k; ++j) {
    b.Output(BroadcastOverColumns(b, b.Column(weights, j), x));
  }
  return b;
}

// On the expert slice, device e being expert e: its rows of each choice (a number only the
// data knows) through gelu(x w1[e]) w2[e]. Keeps what the backward pass needs.
FunctionBuilder Experts(const MoeConfig& c) {
  FunctionBuilder b("moe_experts");
  std::vector<Value> x, ids, home;
  for (int j = 0; j < c.top_k; ++j) {
    x.push_back(b.Input(DType::kF32, {kDynamicDim, c.width}));
    ids.push_back(b.Input(DType::kI32, {kDynamicDim}));
    home.push_back(b.Input(DType::kI32, {kDynamicDim}));
  }
  const Value w1 = b.Input(DType::kF32, {c.experts, c.width, c.hidden});
  const Value w2 = b.Input(DType::kF32, {c.experts, c.hidden, c.width});
  for (int j = 0; j < c.top_k; ++j) {
    const Value hidden = b.GroupedMatmul(x[j], w1);
    const Value activation = b.Gelu(hidden);
    b.Output(b.GroupedMatmul(activation, w2));
    for (Value v : {ids[j], home[j], x[j], hidden, activation}) b.Output(v);
  }
  return b;
}

// On the token slice: out = sum over j of gate_j * (the rows of choice j put back in token
// order), the mean squared error against the target, and the gradient of that loss with
// respect to each choice's rows, still in token order: d out * gate_j.
FunctionBuilder Combine(const MoeConfig& c) {
  FunctionBuilder b("moe_combine");
  std::vector<Value> y, ids, gate;
  for (int j = 0; j < c.top_k; ++j) {
    y.push_back(b.Input(DType::kF32, {kDynamicDim, c.width}));
    ids.push_back(b.Input(DType::kI32, {kDynamicDim}));
  }
  for (int j = 0; j < c.top_k; ++j) {
    gate.push_back(b.Input(DType::kF32, {c.tokens, c.width}, Sharding::Replicated()));
  }
  const Value target = b.Input(DType::kF32, {c.tokens, c.width}, Sharding::Replicated());
  Value out = b.Mul(gate[0], b.ScatterAddRows(y[0], ids[0], c.tokens));
  for (int j = 1; j < c.top_k; ++j) {
    out = b.Add(out, b.Mul(gate[j], b.ScatterAddRows(y[j], ids[j], c.tokens)));
  }
  const Value diff = b.Sub(out, target);
  const double elements = static_cast<double>(c.tokens * c.width);
  b.Output(b.Mul(b.ReduceSum(b.ReduceSum(b.Mul(diff, diff), 1), 0), 1.0 / elements));
  b.Output(out);
  const Value dout = b.Mul(diff, 2.0 / elements);
  for (int j = 0; j < c.top_k; ++j) b.Output(b.Mul(dout, gate[j]));
  return b;
}

// On the expert slice: each routed row's gradient gathered by its token id, back through
// the expert's MLP, each expert's weight gradients summed over its own rows of every
// choice, and an Adam step of its weights.
FunctionBuilder Backward(const MoeConfig& c) {
  FunctionBuilder b("moe_backward");
  std::vector<Value> grad, ids, x, hidden, activation;
  for (int j = 0; j < c.top_k; ++j) {
    grad.push_back(b.Input(DType::kF32, {c.tokens, c.width}, Sharding::Replicated()));
    ids.push_back(b.Input(DType::kI32, {kDynamicDim}));
    x.push_back(b.Input(DType::kF32, {kDynamicDim, c.width}));
    hidden.push_back(b.Input(DType::kF32, {kDynamicDim, c.hidden}));
    activation.push_back(b.Input(DType::kF32, {kDynamicDim, c.hidden}));
  }
  const Shape w1_shape = {c.experts, c.width, c.hidden};
  const Shape w2_shape = {c.experts, c.hidden, c.width};
  const Value w1 = b.Input(DType::kF32, w1_shape);
  const Value w2 = b.Input(DType::kF32, w2_shape);
  const Value m1 = b.Input(DType::kF32, w1_shape);
  const Value v1 = b.Input(DType::kF32, w1_shape);
  const Value m2 = b.Input(DType::kF32, w2_shape);
  const Value v2 = b.Input(DType::kF32, w2_shape);
  const Value step = b.Input(DType::kI32, {}, Sharding::Replicated());
  Value dw1, dw2;
  for (int j = 0; j < c.top_k; ++j) {
    const Value dy = b.GatherRows(grad[j], ids[j]);
    const Value dw2_j = b.GroupedWeightGrad(activation[j], dy, c.experts);
    const Value dhidden = b.GeluBackward(b.GroupedMatmul(dy, w2, /*transpose_w=*/true), hidden[j]);
    const Value dw1_j = b.GroupedWeightGrad(x[j], dhidden, c.experts);
    dw1 = j == 0 ? dw1_j : b.Add(dw1, dw1_j);
    dw2 = j == 0 ? dw2_j : b.Add(dw2, dw2_j);
  }
  AdamOptions adam;
  adam.learning_rate = c.learning_rate;
  const auto next1 = b.AdamUpdate(w1, dw1, m1, v1, step, adam);
  const auto next2 = b.AdamUpdate(w2, dw2, m2, v2, step, adam);
  for (Value v : {next1.param, next2.param, next1.m, next1.v, next2.m, next2.v}) b.Output(v);
  return b;
}

// Registers the step's functions on a token slice and an expert slice and traces the
// program that chains them. Arguments: x, token ids, home shards, the gate wg, target, w1,
// w2, m1, v1, m2, v2, step. Results: loss, the layer's output, w1, w2, m1, v1, m2, v2 after
// the step, and the k choices the gate made on the devices (kChoices on).
Result<Program> BuildProgram(Client& client, const std::string& island, const MoeConfig& c) {
  ATOLL_ASSIGN_OR_RETURN(Slice token_slice, client.CreateSlice(1, island));
  ATOLL_ASSIGN_OR_RETURN(Slice expert_slice,
                         client.CreateSlice(static_cast<uint32_t>(c.experts), island));
  ATOLL_ASSIGN_OR_RETURN(Function dispatch, client.Register(Dispatch(c), token_slice));
  ATOLL_ASSIGN_OR_RETURN(Function experts, client.Register(Experts(c), expert_slice));
  ATOLL_ASSIGN_OR_RETURN(Function combine, client.Register(Combine(c), token_slice));
  ATOLL_ASSIGN_OR_RETURN(Function backward, client.Register(Backward(c), expert_slice));

  ProgramBuilder p;
  std::vector<Traced> dispatch_args = {
      p.Arg(DType::kF32, {c.tokens, c.width}), p.Arg(DType::kI32, {c.tokens}),
      p.Arg(DType::kI32, {c.tokens}), p.Arg(DType::kF32, {c.width, c.experts})};
  const Traced target = p.Arg(DType::kF32, {c.tokens, c.width});
  std::vector<Traced> params;
  for (const Shape& shape :
       {Shape{c.experts, c.width, c.hidden}, Shape{c.experts, c.hidden, c.width},
        Shape{c.experts, c.width, c.hidden}, Shape{c.experts, c.width, c.hidden},
        Shape{c.experts, c.hidden, c.width}, Shape{c.experts, c.hidden, c.width}}) {
    params.push_back(p.Arg(DType::kF32, shape));
  }
  const Traced step = p.Arg(DType::kI32, {});

  const std::vector<Traced> tokens = p.Call(dispatch, dispatch_args);
  std::vector<Traced> routed;
  for (int j = 0; j < c.top_k; ++j) {
    for (int n = 0; n < 3; ++n) routed.push_back(p.Route(tokens[n], tokens[3 + j]));
  }
  routed.push_back(params[0]);
  routed.push_back(params[1]);
  const std::vector<Traced> forward = p.Call(experts, routed);
  auto of = [&](int j, ForwardOutput n) { return forward[j * kForwardOutputs + n]; };

  std::vector<Traced> returned;
  for (int j = 0; j < c.top_k; ++j) {
    returned.push_back(p.Route(of(j, kY), of(j, kHome)));
    returned.push_back(p.Route(of(j, kIds), of(j, kHome)));
  }
  for (int j = 0; j < c.top_k; ++j) returned.push_back(tokens[3 + c.top_k + j]);  // gate weights
  returned.push_back(target);
  const std::vector<Traced> combined = p.Call(combine, returned);

  std::vector<Traced> backward_args;
  for (int j = 0; j < c.top_k; ++j) {
    for (Traced t : {combined[2 + j], of(j, kIds), of(j, kX), of(j, kHidden), of(j, kActivation)}) {
      backward_args.push_back(t);
    }
  }
  backward_args.insert(backward_args.end(), params.begin(), params.end());
  backward_args.push_back(step);
  const std::vector<Traced> updated = p.Call(backward, backward_args);

  std::vector<Traced> results = {combined[0], combined[1]};
  results.insert(results.end(), updated.begin(), updated.end());
  for (int j = 0; j < c.top_k; ++j) results.push_back(tokens[3 + j]);
  p.Return(results);
  return p.Build();
}

// The tanh approximation, as the gelu kernel (kernels::UnaryFn::kGelu) computes it.
double Gelu(double x) {
  constexpr double kC = 0.7978845608028654;  // sqrt(2 / pi)
  return 0.5 * x * (1.0 + std::tanh(kC * (x + 0.044715 * x * x * x)));
}

// The k experts with the highest gate scores for one token, best first (the lower index
// first among equal scores), and the softmax of their scores.
void TopK(const std::vector<double>& scores, int k, std::vector<int32_t>& experts,
          std::vector<double>& weights) {
  std::vector<int32_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return scores[a] > scores[b]; });
  experts.assign(order.begin(), order.begin() + k);
  weights.clear();
  double sum = 0;
  for (int32_t e : experts) sum += weights.emplace_back(std::exp(scores[e] - scores[experts[0]]));
  for (double& w : weights) w /= sum;
}

MoeParams RandomParams(std::mt19937& rng, const MoeConfig& c, float scale) {
  return {
      Uniform(rng, {c.experts, c.width, c.hidden}, scale / std::sqrt(static_cast<float>(c.width))),
      Uniform(rng, {c.experts, c.hidden, c.width},
              scale / std::sqrt(static_cast<float>(c.hidden)))};
}

}  // namespace

MoeParams InitMoe(const MoeConfig& c) {
  std::mt19937 rng(c.seed);
  return RandomParams(rng, c, 1.0f);
}

MoeBatch MakeMoeBatch(const MoeConfig& c, int step) {
  std::mt19937 fixed(c.seed ^ 0x6a7e5u);  // the gate and the teacher, the same every step
  MoeBatch batch;
  batch.gate = Uniform(fixed, {c.width, c.experts}, 1.0f);
  const MoeParams teacher = RandomParams(fixed, c, 2.0f);
  std::mt19937 rng(c.seed * 7919u + static_cast<uint32_t>(step));
  batch.x = Uniform(rng, {c.tokens, c.width}, 1.0f);
  for (int j = 0; j < c.top_k; ++j) {
    batch.choices.emplace_back(DType::kI32, Shape{c.tokens});
    batch.weights.emplace_back(DType::kF32, Shape{c.tokens});
  }
  const auto x = batch.x.as<float>();
  const auto g = batch.gate.as<float>();
  std::vector<double> scores(c.experts);
  std::vector<int32_t> experts;
  std::vector<double> weights;
  for (int64_t t = 0; t < c.tokens; ++t) {
    std::fill(scores.begin(), scores.end(), 0.0);
    for (int64_t i = 0; i < c.width; ++i) {
      for (int e = 0; e < c.experts; ++e) scores[e] += x[t * c.width + i] * g[i * c.experts + e];
    }
    TopK(scores, c.top_k, experts, weights);
    for (int j = 0; j < c.top_k; ++j) {
      batch.choices[j].as<int32_t>()[t] = experts[j];
      batch.weights[j].as<float>()[t] = static_cast<float>(weights[j]);
    }
  }
  batch.target = DenseMoe(teacher, batch);
  return batch;
}

Tensor DenseMoe(const MoeParams& params, const MoeBatch& batch) {
  const int64_t tokens = batch.x.shape()[0];
  const int64_t width = batch.x.shape()[1];
  const int64_t hidden = params.w1.shape()[2];
  const auto x = batch.x.as<float>();
  const auto w1 = params.w1.as<float>();
  const auto w2 = params.w2.as<float>();
  Tensor out(DType::kF32, {tokens, width});
  std::vector<double> activation(hidden);
  for (int64_t t = 0; t < tokens; ++t) {
    for (size_t j = 0; j < batch.choices.size(); ++j) {
      const int64_t e = batch.choices[j].as<int32_t>()[t];
      const double weight = batch.weights[j].as<float>()[t];
      for (int64_t h = 0; h < hidden; ++h) {
        double sum = 0;
        for (int64_t i = 0; i < width; ++i) {
          sum += double{x[t * width + i]} * w1[(e * width + i) * hidden + h];
        }
        activation[h] = Gelu(sum);
      }
      for (int64_t i = 0; i < width; ++i) {
        double sum = 0;
        for (int64_t h = 0; h < hidden; ++h)
          sum += activation[h] * w2[(e * hidden + h) * width + i];
        out.as<float>()[t * width + i] += static_cast<float>(weight * sum);
      }
    }
  }
  return out;
}

Result<MoeResult> TrainMoe(Client& client, const std::string& island, const MoeConfig& c,
                           const std::function<void(const MoeStep&)>& on_step) {
  if (c.tokens < 1 || c.width < 1 || c.hidden < 1 || c.experts < 1 || c.top_k < 1 ||
      c.top_k > c.experts || c.steps < 1) {
    return InvalidArgument(fmt::format(
        "need tokens, width, hidden, experts and steps >= 1 and 1 <= top_k <= experts; got "
        "tokens {}, width {}, hidden {}, experts {}, top_k {}, steps {}",
        c.tokens, c.width, c.hidden, c.experts, c.top_k, c.steps));
  }
  ATOLL_ASSIGN_OR_RETURN(Program program, BuildProgram(client, island, c));
  std::vector<int32_t> token_ids(c.tokens);
  std::iota(token_ids.begin(), token_ids.end(), 0);
  const Tensor ids = Tensor::I32({c.tokens}, token_ids);
  const Tensor home(DType::kI32, {c.tokens});  // the token slice has one device: shard 0

  MoeResult result{InitMoe(c), {}, {}};
  // w1, w2, m1, v1, m2, v2: values at first, then the previous run's futures.
  std::vector<Input> state = {result.params.w1,
                              result.params.w2,
                              Tensor(DType::kF32, result.params.w1.shape()),
                              Tensor(DType::kF32, result.params.w1.shape()),
                              Tensor(DType::kF32, result.params.w2.shape()),
                              Tensor(DType::kF32, result.params.w2.shape())};
  const auto start = std::chrono::steady_clock::now();
  for (int s = 1; s <= c.steps; ++s) {
    const auto step_start = std::chrono::steady_clock::now();
    const MoeBatch batch = MakeMoeBatch(c, s);
    std::vector<Input> args = {batch.x, ids, home, batch.gate, batch.target};
    args.insert(args.end(), state.begin(), state.end());
    args.push_back(Tensor::I32({}, {s}));
    ATOLL_ASSIGN_OR_RETURN(Run run, client.Submit(program, args));
    auto outputs = run.Wait(c.step_timeout);
    if (!outputs.ok()) return outputs.status().WithContext(fmt::format("step {}", s));
    for (size_t i = 0; i < state.size(); ++i) state[i] = run.Output(2 + i);
    result.losses.push_back((*outputs)[0].as<float>()[0]);

    MoeStep step;
    step.step = s;
    step.loss = result.losses.back();
    step.choices.assign(outputs->begin() + kChoices, outputs->end());
    step.routed.assign(c.experts, 0);
    for (const Tensor& choice : step.choices) {
      for (int32_t e : choice.as<int32_t>()) {
        if (e < 0 || e >= c.experts) {
          return Internal(fmt::format("step {}: the gate chose expert {} of {}", s, e, c.experts));
        }
        ++step.routed[e];
      }
    }
    step.elapsed = std::chrono::steady_clock::now() - step_start;
    step.params = &result.params;
    step.batch = &batch;
    step.output = &(*outputs)[1];
    if (on_step) on_step(step);
    result.params = {std::move((*outputs)[2]), std::move((*outputs)[3])};
  }
  result.elapsed = std::chrono::steady_clock::now() - start;
  return result;
}

}  // namespace atl::examples
