#include "examples/moe/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "atoll/function.h"
#include "atoll/grad.h"
#include "atoll/program.h"
#include "examples/common/uniform.h"

namespace atl::examples {

namespace {

// What carries over from step to step, in the order of the program's arguments and results:
// the weights and their Adam moments.
enum State { kGate, kW1, kW2, kGateM, kGateV, kM1, kV1, kM2, kV2, kStateSize };
// The program's results: loss, output, the state after the step, the gate's k choices.
constexpr size_t kStateResults = 2;
constexpr size_t kChoices = kStateResults + kStateSize;

// Outputs of the experts' forward function, per choice j of k: at j * kForwardOutputs + n.
enum ForwardOutput { kY, kIds, kHome, kX, kForwardOutputs };

// v [m] on every column of an [m,width] matrix, from existing ops: BiasAdd adds v to each
// row of a zero [width,m] (x's transpose times 0; x is finite), and Transpose turns that
// back. Row-wise, so it holds for rows cut over the slice too.
Value BroadcastOverColumns(FunctionBuilder& b, Value v, Value x) {
  return b.Transpose(b.BiasAdd(b.Mul(b.Transpose(x), 0.0), v));
}

// On the token slice: the gate. Hands the tokens, their ids, their home shard (the token
// slice's shard that holds them, where their outputs go back) and their k choices to Route,
// which takes rows and destinations from one call, and the gate weights to the combine.
FunctionBuilder Dispatch(const MoeConfig& c) {
  FunctionBuilder b("moe_dispatch");
  const Value x = b.Input(DType::kF32, {c.tokens, c.width});
  b.Output(x);
  b.Output(b.Input(DType::kI32, {c.tokens}));
  b.Output(b.Input(DType::kI32, {c.tokens}));
  const Value wg = b.Input(DType::kF32, {c.width, c.experts}, Sharding::Replicated());
  const Value chosen = b.TopK(b.Matmul(x, wg), c.top_k).indices;
  for (int j = 0; j < c.top_k; ++j) b.Output(b.Column(chosen, j));
  b.Output(b.Call(MoeGate(c), {x, wg})[0]);
  return b;
}

// On the expert slice, device e being expert e: its rows of each choice (a number only the
// data knows) through its MLP; the ids, home shards and rows pass on for the way back.
FunctionBuilder Experts(const MoeConfig& c) {
  FunctionBuilder b("moe_experts");
  std::vector<Value> x, ids, home;
  for (int j = 0; j < c.top_k; ++j) {
    x.push_back(b.Input(DType::kF32, {kDynamicDim, c.width}));
    ids.push_back(b.Input(DType::kI32, {kDynamicDim}));
    home.push_back(b.Input(DType::kI32, {kDynamicDim}));
  }
  std::vector<Value> args = x;
  args.push_back(b.Input(DType::kF32, {c.experts, c.width, c.hidden}));
  args.push_back(b.Input(DType::kF32, {c.experts, c.hidden, c.width}));
  const std::vector<Value> y = b.Call(MoeExperts(c), args);
  for (size_t j = 0; j < y.size(); ++j) {
    for (Value v : {y[j], ids[j], home[j], x[j]}) b.Output(v);
  }
  return b;
}

// On the token slice: each choice's rows back in token order, the loss and layer output,
// and the loss's gradients with respect to each choice's rows (still in token order) and
// the gate weights.
Result<FunctionBuilder> Combine(const MoeConfig& c) {
  std::vector<int> wrt(c.top_k + 1);  // every y_j and the gate weights
  std::iota(wrt.begin(), wrt.end(), 0);
  ATOLL_ASSIGN_OR_RETURN(const FunctionBuilder loss, ValueAndGrad(MoeLoss(c), wrt));
  FunctionBuilder b("moe_combine");
  std::vector<Value> y, ids;
  for (int j = 0; j < c.top_k; ++j) {
    y.push_back(b.Input(DType::kF32, {kDynamicDim, c.width}));
    ids.push_back(b.Input(DType::kI32, {kDynamicDim}));
  }
  std::vector<Value> args;
  for (int j = 0; j < c.top_k; ++j) args.push_back(b.ScatterAddRows(y[j], ids[j], c.tokens));
  args.push_back(b.Input(DType::kF32, {c.tokens, c.top_k}, Sharding::Replicated()));
  args.push_back(b.Input(DType::kF32, {c.tokens, c.width}, Sharding::Replicated()));
  for (Value v : b.Call(loss, args)) b.Output(v);  // loss, output, dy_j, dweights
  if (!b.status().ok()) return b.status();
  return b;
}

// On the expert slice: each routed row's gradient gathered by its token id, each expert's
// weight gradients over its own rows of every choice, and an Adam step of its weights.
Result<FunctionBuilder> ExpertUpdate(const MoeConfig& c) {
  ATOLL_ASSIGN_OR_RETURN(const FunctionBuilder gradients, MoeExpertGradients(c));
  FunctionBuilder b("moe_expert_update");
  std::vector<Value> x, dy;
  for (int j = 0; j < c.top_k; ++j) {
    const Value grad = b.Input(DType::kF32, {c.tokens, c.width}, Sharding::Replicated());
    dy.push_back(b.GatherRows(grad, b.Input(DType::kI32, {kDynamicDim})));
    x.push_back(b.Input(DType::kF32, {kDynamicDim, c.width}));
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
  std::vector<Value> args = x;
  args.push_back(w1);
  args.push_back(w2);
  args.insert(args.end(), dy.begin(), dy.end());
  const std::vector<Value> grads = b.Call(gradients, args);
  if (!b.status().ok()) return b.status();
  AdamOptions adam;
  adam.learning_rate = c.learning_rate;
  const auto next1 = b.AdamUpdate(w1, grads[0], m1, v1, step, adam);
  const auto next2 = b.AdamUpdate(w2, grads[1], m2, v2, step, adam);
  for (Value v : {next1.param, next2.param, next1.m, next1.v, next2.m, next2.v}) b.Output(v);
  return b;
}

// On the token slice: the gate weights' gradient back to wg, and an Adam step of wg.
Result<FunctionBuilder> GateUpdate(const MoeConfig& c) {
  ATOLL_ASSIGN_OR_RETURN(const FunctionBuilder gradient,
                         Grad(MoeGate(c), {1}, {.cotangents = true}));
  FunctionBuilder b("moe_gate_update");
  const Value x = b.Input(DType::kF32, {c.tokens, c.width});
  const Value wg = b.Input(DType::kF32, {c.width, c.experts}, Sharding::Replicated());
  const Value dweights = b.Input(DType::kF32, {c.tokens, c.top_k});
  const Value m = b.Input(DType::kF32, {c.width, c.experts}, Sharding::Replicated());
  const Value v = b.Input(DType::kF32, {c.width, c.experts}, Sharding::Replicated());
  const Value step = b.Input(DType::kI32, {}, Sharding::Replicated());
  const std::vector<Value> dwg = b.Call(gradient, {x, wg, dweights});
  if (!b.status().ok()) return b.status();
  AdamOptions adam;
  adam.learning_rate = c.learning_rate;
  const auto next = b.AdamUpdate(wg, dwg[0], m, v, step, adam);
  for (Value out : {next.param, next.m, next.v}) b.Output(out);
  return b;
}

// Registers the step's functions on a token slice and an expert slice and traces the
// program that chains them. Arguments: x, token ids, home shards, target, the state (State's
// order), step. Results: loss, the layer's output, the state after the step, and the k
// choices the gate made on the devices.
Result<Program> BuildProgram(Client& client, const std::string& island, const MoeConfig& c) {
  ATOLL_ASSIGN_OR_RETURN(Slice token_slice, client.CreateSlice(1, island));
  ATOLL_ASSIGN_OR_RETURN(Slice expert_slice,
                         client.CreateSlice(static_cast<uint32_t>(c.experts), island));
  ATOLL_ASSIGN_OR_RETURN(Function dispatch, client.Register(Dispatch(c), token_slice));
  ATOLL_ASSIGN_OR_RETURN(Function experts, client.Register(Experts(c), expert_slice));
  ATOLL_ASSIGN_OR_RETURN(const FunctionBuilder combine_builder, Combine(c));
  ATOLL_ASSIGN_OR_RETURN(Function combine, client.Register(combine_builder, token_slice));
  ATOLL_ASSIGN_OR_RETURN(const FunctionBuilder expert_update_builder, ExpertUpdate(c));
  ATOLL_ASSIGN_OR_RETURN(Function expert_update,
                         client.Register(expert_update_builder, expert_slice));
  ATOLL_ASSIGN_OR_RETURN(const FunctionBuilder gate_update_builder, GateUpdate(c));
  ATOLL_ASSIGN_OR_RETURN(Function gate_update, client.Register(gate_update_builder, token_slice));

  ProgramBuilder p;
  const Traced x = p.Arg(DType::kF32, {c.tokens, c.width});
  const Traced ids = p.Arg(DType::kI32, {c.tokens});
  const Traced home = p.Arg(DType::kI32, {c.tokens});
  const Traced target = p.Arg(DType::kF32, {c.tokens, c.width});
  const Shape gate_shape = {c.width, c.experts};
  const Shape w1_shape = {c.experts, c.width, c.hidden};
  const Shape w2_shape = {c.experts, c.hidden, c.width};
  std::vector<Traced> state;
  for (const Shape& shape : {gate_shape, w1_shape, w2_shape, gate_shape, gate_shape, w1_shape,
                             w1_shape, w2_shape, w2_shape}) {
    state.push_back(p.Arg(DType::kF32, shape));
  }
  const Traced step = p.Arg(DType::kI32, {});

  // tokens: x, ids, home, the k choices, the gate weights.
  const std::vector<Traced> tokens = p.Call(dispatch, {x, ids, home, state[kGate]});
  std::vector<Traced> routed;
  for (int j = 0; j < c.top_k; ++j) {
    for (int n = 0; n < 3; ++n) routed.push_back(p.Route(tokens[n], tokens[3 + j]));
  }
  routed.push_back(state[kW1]);
  routed.push_back(state[kW2]);
  const std::vector<Traced> forward = p.Call(experts, routed);
  auto of = [&](int j, ForwardOutput n) { return forward[j * kForwardOutputs + n]; };

  std::vector<Traced> returned;
  for (int j = 0; j < c.top_k; ++j) {
    returned.push_back(p.Route(of(j, kY), of(j, kHome)));
    returned.push_back(p.Route(of(j, kIds), of(j, kHome)));
  }
  returned.push_back(tokens[3 + c.top_k]);
  returned.push_back(target);
  // combined: loss, output, the gradient of each choice's rows, the gate weights' gradient.
  const std::vector<Traced> combined = p.Call(combine, returned);

  std::vector<Traced> expert_args;
  for (int j = 0; j < c.top_k; ++j) {
    for (Traced t : {combined[2 + j], of(j, kIds), of(j, kX)}) expert_args.push_back(t);
  }
  for (State s : {kW1, kW2, kM1, kV1, kM2, kV2}) expert_args.push_back(state[s]);
  expert_args.push_back(step);
  const std::vector<Traced> experts_next = p.Call(expert_update, expert_args);
  const std::vector<Traced> gate_next = p.Call(
      gate_update, {x, state[kGate], combined[2 + c.top_k], state[kGateM], state[kGateV], step});

  std::vector<Traced> results = {combined[0], combined[1]};
  if (gate_next.size() == 3 && experts_next.size() == 6) {  // else Build() says why
    results.insert(results.end(),
                   {gate_next[0], experts_next[0], experts_next[1], gate_next[1], gate_next[2],
                    experts_next[2], experts_next[3], experts_next[4], experts_next[5]});
  }
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
  MoeParams params;
  params.gate = Uniform(rng, {c.width, c.experts}, 1.0f);
  params.w1 =
      Uniform(rng, {c.experts, c.width, c.hidden}, scale / std::sqrt(static_cast<float>(c.width)));
  params.w2 =
      Uniform(rng, {c.experts, c.hidden, c.width}, scale / std::sqrt(static_cast<float>(c.hidden)));
  return params;
}

}  // namespace

FunctionBuilder MoeExperts(const MoeConfig& c) {
  FunctionBuilder b("moe_expert_mlps");
  std::vector<Value> x;
  for (int j = 0; j < c.top_k; ++j) x.push_back(b.Input(DType::kF32, {kDynamicDim, c.width}));
  const Value w1 = b.Input(DType::kF32, {c.experts, c.width, c.hidden});
  const Value w2 = b.Input(DType::kF32, {c.experts, c.hidden, c.width});
  for (int j = 0; j < c.top_k; ++j) {
    b.Output(b.GroupedMatmul(b.Gelu(b.GroupedMatmul(x[j], w1)), w2));
  }
  return b;
}

Result<FunctionBuilder> MoeExpertGradients(const MoeConfig& c) {
  GradOptions options{.outputs = {}, .cotangents = true};
  for (int j = 0; j < c.top_k; ++j) options.outputs.push_back(j);
  return Grad(MoeExperts(c), {c.top_k, c.top_k + 1}, options);
}

FunctionBuilder MoeGate(const MoeConfig& c) {
  FunctionBuilder b("moe_gate");
  const Value x = b.Input(DType::kF32, {c.tokens, c.width});
  const Value wg = b.Input(DType::kF32, {c.width, c.experts}, Sharding::Replicated());
  b.Output(b.Softmax(b.TopK(b.Matmul(x, wg), c.top_k).values));
  return b;
}

FunctionBuilder MoeLoss(const MoeConfig& c) {
  FunctionBuilder b("moe_loss");
  std::vector<Value> y;
  for (int j = 0; j < c.top_k; ++j) {
    y.push_back(b.Input(DType::kF32, {c.tokens, c.width}, Sharding::Replicated()));
  }
  const Value weights = b.Input(DType::kF32, {c.tokens, c.top_k}, Sharding::Replicated());
  const Value target = b.Input(DType::kF32, {c.tokens, c.width}, Sharding::Replicated());
  Value out;
  for (int j = 0; j < c.top_k; ++j) {
    const Value weighted = b.Mul(BroadcastOverColumns(b, b.Column(weights, j), target), y[j]);
    out = j == 0 ? weighted : b.Add(out, weighted);
  }
  const Value diff = b.Sub(out, target);
  const double elements = static_cast<double>(c.tokens * c.width);
  b.Output(b.Mul(b.ReduceSum(b.ReduceSum(b.Mul(diff, diff), 1), 0), 1.0 / elements));
  b.Output(out);
  return b;
}

MoeParams InitMoe(const MoeConfig& c) {
  std::mt19937 rng(c.seed);
  return RandomParams(rng, c, 1.0f);
}

MoeBatch MakeMoeBatch(const MoeConfig& c, int step) {
  std::mt19937 fixed(c.seed ^ 0x6a7e5u);  // the teacher, the same every step
  const MoeParams teacher = RandomParams(fixed, c, 2.0f);
  std::mt19937 rng(c.seed * 7919u + static_cast<uint32_t>(step));
  MoeBatch batch;
  batch.x = Uniform(rng, {c.tokens, c.width}, 1.0f);
  batch.target = DenseMoe(teacher, batch.x, c.top_k);
  return batch;
}

GateChoices ChooseExperts(const Tensor& gate, const Tensor& x, int top_k) {
  const int64_t tokens = x.shape()[0];
  const int64_t width = x.shape()[1];
  const int64_t num_experts = gate.shape()[1];
  GateChoices choices;
  for (int j = 0; j < top_k; ++j) {
    choices.experts.emplace_back(DType::kI32, Shape{tokens});
    choices.weights.emplace_back(DType::kF32, Shape{tokens});
  }
  const auto xs = x.as<float>();
  const auto g = gate.as<float>();
  std::vector<double> scores(num_experts);
  std::vector<int32_t> experts;
  std::vector<double> weights;
  for (int64_t t = 0; t < tokens; ++t) {
    std::fill(scores.begin(), scores.end(), 0.0);
    for (int64_t i = 0; i < width; ++i) {
      for (int64_t e = 0; e < num_experts; ++e) {
        scores[e] += double{xs[t * width + i]} * g[i * num_experts + e];
      }
    }
    TopK(scores, top_k, experts, weights);
    for (int j = 0; j < top_k; ++j) {
      choices.experts[j].as<int32_t>()[t] = experts[j];
      choices.weights[j].as<float>()[t] = static_cast<float>(weights[j]);
    }
  }
  return choices;
}

Tensor DenseMoe(const MoeParams& params, const Tensor& x, int top_k) {
  const GateChoices gate = ChooseExperts(params.gate, x, top_k);
  const int64_t tokens = x.shape()[0];
  const int64_t width = x.shape()[1];
  const int64_t hidden = params.w1.shape()[2];
  const auto xs = x.as<float>();
  const auto w1 = params.w1.as<float>();
  const auto w2 = params.w2.as<float>();
  Tensor out(DType::kF32, {tokens, width});
  std::vector<double> activation(hidden);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int j = 0; j < top_k; ++j) {
      const int64_t e = gate.experts[j].as<int32_t>()[t];
      const double weight = gate.weights[j].as<float>()[t];
      for (int64_t h = 0; h < hidden; ++h) {
        double sum = 0;
        for (int64_t i = 0; i < width; ++i) {
          sum += double{xs[t * width + i]} * w1[(e * width + i) * hidden + h];
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
  // Values at first (the moments zero), then the previous run's futures.
  const MoeParams& init = result.params;
  std::vector<Input> state = {init.gate,
                              init.w1,
                              init.w2,
                              Tensor(DType::kF32, init.gate.shape()),
                              Tensor(DType::kF32, init.gate.shape()),
                              Tensor(DType::kF32, init.w1.shape()),
                              Tensor(DType::kF32, init.w1.shape()),
                              Tensor(DType::kF32, init.w2.shape()),
                              Tensor(DType::kF32, init.w2.shape())};
  const auto start = std::chrono::steady_clock::now();
  for (int s = 1; s <= c.steps; ++s) {
    const auto step_start = std::chrono::steady_clock::now();
    const MoeBatch batch = MakeMoeBatch(c, s);
    std::vector<Input> args = {batch.x, ids, home, batch.target};
    args.insert(args.end(), state.begin(), state.end());
    args.push_back(Tensor::I32({}, {s}));
    ATOLL_ASSIGN_OR_RETURN(Run run, client.Submit(program, args));
    auto outputs = run.Wait(c.step_timeout);
    if (!outputs.ok()) return outputs.status().WithContext(fmt::format("step {}", s));
    for (size_t i = 0; i < state.size(); ++i) state[i] = run.Output(kStateResults + i);
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
    result.params = {std::move((*outputs)[kStateResults + kGate]),
                     std::move((*outputs)[kStateResults + kW1]),
                     std::move((*outputs)[kStateResults + kW2])};
  }
  result.elapsed = std::chrono::steady_clock::now() - start;
  return result;
}

}  // namespace atl::examples
