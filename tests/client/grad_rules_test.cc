// Every gradient rule (common/ir/ops.def's GradRule column) against central finite differences in
// f64: one row per differentiable op (and per form of it: scalar operands, transposes, broadcasts),
// and sharded rows whose backward sums over a cut dimension, so that Grad's all_reduce_sum is what
// makes their gradient right. Functions run through the interpreter and the cpu backend, each shard
// on its thread (tests/compute/shard_runner.h).
//
// Each row's function has one output y; the test draws a random cotangent r of y's type
// and checks the vector-Jacobian product (Grad with cotangents) against the central
// difference of <r, y(x)> for every element of every differentiated input. Rows whose
// output is a scalar are also differentiated as a loss (Grad without cotangents).
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "atoll/grad.h"
#include "client/autodiff/grad_rules.h"
#include "client/internal.h"
#include "tests/compute/shard_runner.h"
#include "tests/kernels/test_tensors.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

// The dtype of the functions checked, and the step and tolerance that suit it: in f64 a
// central difference with step 1e-6 is exact to about 1e-10, so 1e-7 leaves room for the
// gradients' own rounding and nothing for a wrong rule.
constexpr DType kDType = DType::kF64;
constexpr double kStep = 1e-6;
constexpr double kTolerance = 1e-7;  // of |numeric - analytic| / (1 + |analytic|)
// An f32 input (the cast rows) takes values on a grid of kGridStep and steps of it, which f32
// holds exactly, and only functions linear in it, so that its central difference is exact.
constexpr double kGridStep = 1.0 / 64;

double Get(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kF32 ? t.as<float>()[i] : t.as<double>()[i];
}
void Set(Tensor& t, int64_t i, double v) {
  if (t.dtype() == DType::kF32) {
    t.as<float>()[i] = static_cast<float>(v);
  } else {
    t.as<double>()[i] = v;
  }
}
double StepFor(const Tensor& t) { return t.dtype() == DType::kF32 ? kGridStep : kStep; }

// A row's function being made: its inputs with their values, and which are differentiated.
class Case {
 public:
  explicit Case(uint32_t seed) : rng_(seed) {}

  FunctionBuilder& b() { return b_; }

  // A differentiated input, uniform in [lo, hi), or away from 0 when `away_from_zero`
  // (|x| in [0.2, 1], for kinks and poles at 0).
  Value Real(Shape shape, Sharding sharding = Sharding::Replicated(), double lo = -1,
             double hi = 1) {
    Tensor t(kDType, shape);
    std::uniform_real_distribution<double> u(lo, hi);
    for (int64_t i = 0; i < t.num_elements(); ++i) Set(t, i, u(rng_));
    return Add(std::move(t), std::move(sharding), true);
  }
  Value AwayFromZero(Shape shape, Sharding sharding = Sharding::Replicated()) {
    Tensor t(kDType, shape);
    std::uniform_real_distribution<double> u(0.2, 1);
    std::bernoulli_distribution negative(0.5);
    for (int64_t i = 0; i < t.num_elements(); ++i) Set(t, i, negative(rng_) ? -u(rng_) : u(rng_));
    return Add(std::move(t), std::move(sharding), true);
  }
  // Rows of distinct values at least 0.1 apart (so that a step never reorders them), for
  // top-k.
  Value Distinct(Shape shape, Sharding sharding = Sharding::Replicated()) {
    Tensor t(kDType, shape);
    const int64_t n = shape.back();
    std::vector<int64_t> order(n);
    for (int64_t r = 0; r < t.num_elements() / n; ++r) {
      for (int64_t j = 0; j < n; ++j) order[j] = j;
      std::shuffle(order.begin(), order.end(), rng_);
      for (int64_t j = 0; j < n; ++j) Set(t, r * n + j, -1 + 2.0 * order[j] / n);
    }
    return Add(std::move(t), std::move(sharding), true);
  }
  // A differentiated f32 input on the grid of kGridStep in [-1, 1].
  Value Grid(Shape shape, Sharding sharding = Sharding::Replicated()) {
    Tensor t(DType::kF32, shape);
    std::uniform_int_distribution<int> u(-64, 64);
    for (int64_t i = 0; i < t.num_elements(); ++i) Set(t, i, u(rng_) * kGridStep);
    return Add(std::move(t), std::move(sharding), true);
  }
  // An input that is not differentiated: float values, or i32 ids in [0, bound).
  Value Fixed(Shape shape, Sharding sharding = Sharding::Replicated()) {
    Tensor t(kDType, shape);
    std::uniform_real_distribution<double> u(-1, 1);
    for (int64_t i = 0; i < t.num_elements(); ++i) Set(t, i, u(rng_));
    return Add(std::move(t), std::move(sharding), false);
  }
  Value Ids(Shape shape, int32_t bound, Sharding sharding = Sharding::Replicated()) {
    Tensor t(DType::kI32, shape);
    std::uniform_int_distribution<int32_t> u(0, bound - 1);
    for (int32_t& v : t.as<int32_t>()) v = u(rng_);
    return Add(std::move(t), std::move(sharding), false);
  }

  const std::vector<Tensor>& values() const { return values_; }
  const std::vector<int>& wrt() const { return wrt_; }
  std::mt19937& rng() { return rng_; }

 private:
  Value Add(Tensor t, Sharding sharding, bool differentiated) {
    const Value v = b_.Input(t.dtype(), t.shape(), std::move(sharding));
    if (differentiated) wrt_.push_back(static_cast<int>(values_.size()));
    values_.push_back(std::move(t));
    return v;
  }

  FunctionBuilder b_{"f"};
  std::mt19937 rng_;
  std::vector<Tensor> values_;
  std::vector<int> wrt_;
};

struct Row {
  std::string name;
  int shards;
  std::function<Value(Case&)> build;  // returns the output
};

Sharding SplitRows() { return Sharding::Split(0); }
Sharding Rep() { return Sharding::Replicated(); }

std::vector<Row> AllRows() {
  using B = FunctionBuilder;
  std::vector<Row> rows = {
      {"add", 1,
       [](Case& c) {
         return c.b().Add(c.Real({3, 4}), c.Real({3, 4}));
       }},
      {"add_scalar", 1,
       [](Case& c) {
         return c.b().Add(c.Real({3, 4}), 2.5);
       }},
      {"add_rank0", 1,
       [](Case& c) {
         return c.b().Add(c.Real({}), c.Real({3, 4}));
       }},
      {"sub", 1,
       [](Case& c) {
         return c.b().Sub(c.Real({3, 4}), c.Real({3, 4}));
       }},
      {"sub_scalar", 1, [](Case& c) { return c.b().Sub(c.Real({5}), -1.5); }},
      {"sub_rank0", 2,
       [](Case& c) {
         return c.b().Sub(c.Real({4, 3}, SplitRows()), c.Real({}));
       }},
      {"mul", 1,
       [](Case& c) {
         return c.b().Mul(c.Real({3, 4}), c.Real({3, 4}));
       }},
      {"mul_scalar", 1,
       [](Case& c) {
         return c.b().Mul(c.Real({3, 4}), -3.0);
       }},
      {"mul_rank0", 2,
       [](Case& c) {
         return c.b().Mul(c.Real({}), c.Real({4, 3}, SplitRows()));
       }},
      {"div", 1,
       [](Case& c) {
         return c.b().Div(c.Real({3, 4}), c.AwayFromZero({3, 4}));
       }},
      {"div_scalar", 1, [](Case& c) { return c.b().Div(c.Real({6}), 4.0); }},
      {"div_rank0", 1,
       [](Case& c) {
         return c.b().Div(c.Real({2, 3}), c.Real({}, Rep(), 1, 2));
       }},
      {"div_of_rank0", 1,
       [](Case& c) {
         return c.b().Div(c.Real({}), c.Real({2, 3}, Rep(), 1, 2));
       }},
      {"matmul_data_parallel", 4,
       [](Case& c) {
         return c.b().Matmul(c.Real({8, 3}, SplitRows()), c.Real({3, 2}));
       }},
      {"matmul_cut_contraction", 2,
       [](Case& c) {
         const Value x = c.Real({3, 4}, Sharding::Split(1));
         return c.b().AllReduceSum(c.b().Matmul(x, c.Real({4, 2}, SplitRows())));
       }},
      {"spin", 1, [](Case& c) { return c.b().Spin(c.Real({4}), 10); }},
      {"all_reduce_sum", 4,
       [](Case& c) {
         return c.b().AllReduceSum(c.b().ReduceSum(c.Real({8, 3}, SplitRows()), 0));
       }},
      {"bias_add", 1,
       [](Case& c) {
         return c.b().BiasAdd(c.Real({3, 4}), c.Real({4}));
       }},
      {"bias_add_split_rows", 2,
       [](Case& c) {
         return c.b().BiasAdd(c.Real({4, 3}, SplitRows()), c.Real({3}));
       }},
      {"bias_add_split_columns", 2,
       [](Case& c) {
         return c.b().BiasAdd(c.Real({3, 4}, Sharding::Split(1)), c.Real({4}, SplitRows()));
       }},
      {"reduce_sum_0", 1,
       [](Case& c) {
         return c.b().ReduceSum(c.Real({3, 4}), 0);
       }},
      {"reduce_sum_1", 2,
       [](Case& c) {
         return c.b().ReduceSum(c.Real({4, 3}, SplitRows()), 1);
       }},
      {"reduce_mean", 1,
       [](Case& c) {
         return c.b().ReduceMean(c.Real({3, 4}), -1);
       }},
      {"reduce_sum_to_scalar", 1,
       [](Case& c) {
         return c.b().ReduceSum(c.b().ReduceSum(c.Real({3, 4}), 1), 0);
       }},
      {"softmax", 1,
       [](Case& c) {
         return c.b().Softmax(c.Real({3, 5}, Rep(), -2, 2));
       }},
      {"softmax_split_rows", 2,
       [](Case& c) {
         return c.b().Softmax(c.Real({4, 3}, SplitRows(), -2, 2));
       }},
      {"layer_norm", 1,
       [](Case& c) {
         return c.b().LayerNorm(c.Real({3, 5}, Rep(), -2, 2), c.Real({5}), c.Real({5}));
       }},
      {"layer_norm_split_rows", 2,
       [](Case& c) {
         return c.b().LayerNorm(c.Real({4, 5}, SplitRows(), -2, 2), c.Real({5}), c.Real({5}));
       }},
      {"cross_entropy_loss", 1,
       [](Case& c) {
         return c.b().CrossEntropy(c.Real({4, 3}, Rep(), -2, 2), c.Ids({4}, 3)).loss;
       }},
      {"cross_entropy_loss_split_rows", 4,
       [](Case& c) {
         auto ce =
             c.b().CrossEntropy(c.Real({8, 3}, SplitRows(), -2, 2), c.Ids({8}, 3, SplitRows()));
         return c.b().AllReduceSum(ce.loss);
       }},
      {"cross_entropy_loss_squared", 1,  // a cotangent that is a value, not the constant 1
       [](Case& c) {
         const Value loss = c.b().CrossEntropy(c.Real({4, 3}, Rep(), -2, 2), c.Ids({4}, 3)).loss;
         return c.b().Mul(loss, loss);
       }},
      {"transpose", 1,
       [](Case& c) {
         return c.b().Transpose(c.Real({3, 4}));
       }},
      {"transpose_split", 2,
       [](Case& c) {
         return c.b().Transpose(c.Real({4, 3}, SplitRows()));
       }},
      {"grouped_matmul", 2,
       [](Case& c) {
         return c.b().GroupedMatmul(c.Real({6, 3}, SplitRows()), c.Real({2, 3, 4}, SplitRows()));
       }},
      {"grouped_matmul_transposed", 2,
       [](Case& c) {
         return c.b().GroupedMatmul(c.Real({6, 3}, SplitRows()), c.Real({2, 4, 3}, SplitRows()),
                                    true);
       }},
      {"scatter_add_rows", 1,
       [](Case& c) {
         return c.b().ScatterAddRows(c.Real({5, 3}), c.Ids({5}, 4), 4);
       }},
      {"scatter_add_rows_split", 2,
       [](Case& c) {
         return c.b().AllReduceSum(
             c.b().ScatterAddRows(c.Real({6, 3}, SplitRows()), c.Ids({6}, 4, SplitRows()), 4));
       }},
      {"gather_rows", 1,
       [](Case& c) {
         return c.b().GatherRows(c.Real({4, 3}), c.Ids({6}, 4));
       }},
      {"gather_rows_split_ids", 2,
       [](Case& c) {
         return c.b().GatherRows(c.Real({4, 3}), c.Ids({6}, 4, SplitRows()));
       }},
      {"top_k_values", 1,
       [](Case& c) {
         return c.b().TopK(c.Distinct({3, 6}), 2).values;
       }},
      {"top_k_values_split_rows", 2,
       [](Case& c) {
         return c.b().TopK(c.Distinct({4, 5}, SplitRows()), 3).values;
       }},
      {"column", 2,
       [](Case& c) {
         return c.b().Column(c.Real({4, 3}, SplitRows()), 1);
       }},
      // The collectives, on a 1-D mesh (axis 0); tests/e2e/grad_test.cc runs them on a 2-D
      // mesh of a cluster.
      {"all_reduce_mean", 4,
       [](Case& c) {
         return c.b().AllReduceMean(c.b().ReduceSum(c.Real({8, 3}, SplitRows()), 0), 0);
       }},
      {"all_reduce_mean_whole_slice", 2,
       [](Case& c) {
         return c.b().AllReduceMean(c.b().ReduceSum(c.Real({4, 3}, SplitRows()), 0));
       }},
      {"all_gather", 4,
       [](Case& c) {
         return c.b().AllGather(c.Real({8, 3}, SplitRows()), 0);
       }},
      {"all_gather_of_weights", 4,  // ZeRO: the gathered weight's gradient is partial
       [](Case& c) {
         const Value w = c.b().AllGather(c.Real({4, 2}, SplitRows()), 0);
         return c.b().AllReduceSum(
             c.b().ReduceSum(c.b().Matmul(c.Fixed({8, 4}, SplitRows()), w), 0));
       }},
      {"reduce_scatter", 4,
       [](Case& c) {
         return c.b().ReduceScatter(c.b().ReduceSum(c.Real({8, 4}, SplitRows()), 0), 0, 0);
       }},
      {"all_to_all", 4,
       [](Case& c) {
         return c.b().AllToAll(c.Real({8, 4}, SplitRows()), 0, 1);
       }},
      {"broadcast", 4,
       [](Case& c) {
         return c.b().Broadcast(c.Real({2, 3}), 0, 2);
       }},
      {"collective_permute", 4,
       [](Case& c) {
         return c.b().CollectivePermute(c.Real({8, 3}, SplitRows()), 0, {{0, 1}, {1, 2}, {3, 0}});
       }},
      // cast: an f32 x into the f64 function, which is linear in it (see kGridStep); its
      // gradient is the f64 cotangent cast back to f32.
      {"cast", 2,
       [](Case& c) {
         const Value x = c.b().Cast(c.Grid({4, 3}, SplitRows()), DType::kF64);
         return c.b().Mul(x, c.b().Tanh(c.Real({4, 3}, SplitRows())));
       }},
      // The MLP of examples/mlp, data-parallel: every weight's gradient is a partial sum
      // over the devices' rows until Grad all-reduces it.
      {"mlp_data_parallel", 4,
       [](Case& c) {
         B& b = c.b();
         const Value x = c.Fixed({8, 3}, SplitRows());
         const Value labels = c.Ids({8}, 2, SplitRows());
         const Value w1 = c.Real({3, 4}), b1 = c.Real({4}), w2 = c.Real({4, 2}), b2 = c.Real({2});
         const Value h = b.Gelu(b.BiasAdd(b.Matmul(x, w1), b1));
         return b.AllReduceSum(b.CrossEntropy(b.BiasAdd(b.Matmul(h, w2), b2), labels).loss);
       }},
  };
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      rows.push_back({fmt::format("matmul_transpose_{}{}", ta ? "a" : "", tb ? "b" : ""), 1,
                      [ta, tb](Case& c) {
                        const Value a = c.Real(ta ? Shape{4, 3} : Shape{3, 4});
                        const Value w = c.Real(tb ? Shape{2, 4} : Shape{4, 2});
                        return c.b().Matmul(a, w, ta, tb);
                      }});
    }
  }
  // Every unary op, on two row shards; the domains of log, sqrt and rsqrt are positive.
#define ATOLL_UNARY_OP(Name, name)                                                      \
  rows.push_back({name, 2, [](Case& c) {                                                \
                    const std::string_view op = name;                                   \
                    const bool positive = op == "log" || op == "sqrt" || op == "rsqrt"; \
                    const Value x = positive ? c.Real({4, 3}, SplitRows(), 0.5, 2)      \
                                             : c.AwayFromZero({4, 3}, SplitRows());     \
                    return c.b().Name(x);                                               \
                  }});
#include "atoll/unary_ops.def"
  return rows;
}

std::string RowName(const ::testing::TestParamInfo<Row>& info) { return info.param.name; }
void PrintTo(const Row& row, std::ostream* os) { *os << row.name << " on " << row.shards; }

class GradRuleTest : public ::testing::TestWithParam<Row> {};

// <r, f(values)>, f's one output evaluated on the row's shards.
double Dot(const ir::FunctionDef& f, int shards, const std::vector<Tensor>& values,
           const Tensor& r) {
  Result<std::vector<Tensor>> y = testutil::RunGlobal(f, shards, values);
  EXPECT_THAT(y, IsOk());
  if (!y.ok()) return NAN;
  double dot = 0;
  for (int64_t i = 0; i < r.num_elements(); ++i) dot += Get(r, i) * Get((*y)[0], i);
  return dot;
}

// Every element of every differentiated input: the central difference of <r, f> against
// `grads` (one per differentiated input).
void ExpectFiniteDifferences(const Case& c, const ir::FunctionDef& f, int shards, const Tensor& r,
                             const std::vector<Tensor>& grads) {
  ASSERT_EQ(grads.size(), c.wrt().size());
  for (size_t w = 0; w < c.wrt().size(); ++w) {
    const int input = c.wrt()[w];
    ASSERT_EQ(grads[w].shape(), c.values()[input].shape()) << "input " << input;
    for (int64_t e = 0; e < grads[w].num_elements(); ++e) {
      std::vector<Tensor> plus = c.values(), minus = c.values();
      const double step = StepFor(plus[input]);
      Set(plus[input], e, Get(plus[input], e) + step);
      Set(minus[input], e, Get(minus[input], e) - step);
      const double numeric = (Dot(f, shards, plus, r) - Dot(f, shards, minus, r)) / (2 * step);
      const double analytic = Get(grads[w], e);
      EXPECT_LE(std::abs(numeric - analytic) / (1 + std::abs(analytic)), kTolerance)
          << "input " << input << " element " << e << ": numeric " << numeric << ", Grad "
          << analytic;
    }
  }
}

TEST_P(GradRuleTest, EqualsCentralFiniteDifferences) {
  const Row& row = GetParam();
  Case c(1234);
  c.b().Output(row.build(c));
  ASSERT_THAT(c.b().status(), IsOk());
  const ir::FunctionDef& f = HandleAccess::ImplOf(c.b()).def;
  const ir::TensorType y = ir::OutputTypes(f)[0];

  // The vector-Jacobian product with a random cotangent.
  Tensor r(kDType, y.shape);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < r.num_elements(); ++i) Set(r, i, u(c.rng()));
  ATOLL_ASSERT_OK_AND_ASSIGN(FunctionBuilder vjp, Grad(c.b(), c.wrt(), {.cotangents = true}));
  const ir::FunctionDef& vjp_def = HandleAccess::ImplOf(vjp).def;
  std::vector<Tensor> args = c.values();
  args.push_back(r);
  ATOLL_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> grads,
                             testutil::RunGlobal(vjp_def, row.shards, args));
  // Each gradient has its input's type and sharding.
  for (size_t w = 0; w < c.wrt().size(); ++w) {
    EXPECT_EQ(ir::OutputTypes(vjp_def)[w], f.inputs[c.wrt()[w]]) << "gradient " << w;
  }
  ExpectFiniteDifferences(c, f, row.shards, r, grads);

  // A scalar output is a loss: Grad of it is the vector-Jacobian product with 1.
  if (y.shape.empty()) {
    ATOLL_ASSERT_OK_AND_ASSIGN(FunctionBuilder grad, Grad(c.b(), c.wrt()));
    ATOLL_ASSERT_OK_AND_ASSIGN(
        std::vector<Tensor> loss_grads,
        testutil::RunGlobal(HandleAccess::ImplOf(grad).def, row.shards, c.values()));
    Tensor one(kDType, {});
    Set(one, 0, 1);
    ExpectFiniteDifferences(c, f, row.shards, one, loss_grads);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryDifferentiableOp, GradRuleTest, ::testing::ValuesIn(AllRows()),
                         RowName);

// Every row of the gradient table is covered: each op with a rule appears in some row's
// function (checked by op name against the functions the rows build).
TEST(GradRuleTableTest, EveryRuleHasARow) {
  std::set<ir::OpCode> covered;
  for (const Row& row : AllRows()) {
    Case c(1);
    c.b().Output(row.build(c));
    for (const ir::Op& op : HandleAccess::ImplOf(c.b()).def.ops) covered.insert(op.code);
  }
  for (size_t code = 0; code < ir::kNumOpCodes; ++code) {
    const auto op = static_cast<ir::OpCode>(code);
    if (autodiff::GradRowOf(op).rule == nullptr || op == ir::OpCode::kFillLike) continue;
    // The jax.lax primitives (every row from max on) are checked against jax.grad and finite
    // differences in tests/python/test_lax_grad.py, where JAX is the oracle.
    if (code >= static_cast<size_t>(ir::OpCode::kMax)) continue;
    EXPECT_TRUE(covered.count(op) != 0) << ir::OpName(op) << " has a rule but no row";
  }
}

}  // namespace
}  // namespace atl
