// Fusion of elementwise chains (compute/fusion.h): which ops group, and that a fused run gives
// the unfused run's bits. The oracle is the same function run op by op through a backend
// that forwards to the cpu backend under another name (the interpreter fuses for "cpu" only).
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "compute/backend_cpu.h"
#include "compute/fusion.h"
#include "compute/interpreter.h"
#include "tests/status_matchers.h"

namespace atl::compute {
namespace {

using ir::OpCode;
using ir::Operand;

class OpByOpBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu, op by op"; }
  Result<Tensor> Run(const ir::Op& op, std::span<const Tensor* const> operands) override {
    ++ops;
    return CpuBackend::Get().Run(op, operands);
  }
  int ops = 0;
};

Operand ChainInput(int32_t i) { return {Operand::kInput, i, 0.0}; }
Operand ChainOp(int32_t i) { return {Operand::kOp, i, 0.0}; }
Operand ChainScalar(double v) { return {Operand::kScalar, 0, v}; }

const ir::TensorType kT{DType::kF32, {6, 5}, {-1, -1}};

// Inputs of `fn`'s types, each element drawn from [-2, 2).
std::vector<Tensor> DrawInputs(const ir::FunctionDef& fn, std::mt19937& rng) {
  std::vector<Tensor> inputs;
  for (const ir::TensorType& type : fn.inputs) {
    Tensor t(DType::kF32, type.shape);
    std::uniform_real_distribution<float> dist(-2, 2);
    for (float& v : t.as<float>()) v = dist(rng);
    inputs.push_back(std::move(t));
  }
  return inputs;
}

// Runs `fn` fused and op by op and expects the same bits (NaN where the op-by-op run has
// NaN); returns how many ops the op-by-op run made.
int ExpectFusedGivesOpByOpBits(const ir::FunctionDef& fn, const std::vector<Tensor>& inputs,
                               int round) {
  OpByOpBackend op_by_op;
  const auto want = RunFunction(fn, 0, 1, inputs, op_by_op);
  const auto got = RunFunction(fn, 0, 1, inputs);
  EXPECT_THAT(want, IsOk());
  EXPECT_THAT(got, IsOk()) << "round " << round;
  if (!want.ok() || !got.ok()) return op_by_op.ops;
  for (size_t k = 0; k < want->size(); ++k) {
    const auto a = (*want)[k].as<float>();
    const auto b = (*got)[k].as<float>();
    EXPECT_EQ((*want)[k].shape(), (*got)[k].shape());
    if (a.size() != b.size()) return op_by_op.ops;
    for (size_t e = 0; e < a.size(); ++e) {
      if ((a[e] != a[e] && b[e] != b[e]) || std::memcmp(&a[e], &b[e], 4) == 0) continue;
      ADD_FAILURE() << "round " << round << " output " << k << " element " << e << ": " << a[e]
                    << " op by op, " << b[e] << " fused";
      return op_by_op.ops;
    }
  }
  return op_by_op.ops;
}

TEST(FusionTest, ChainsGroupUpToAValueReadAfterThem) {
  // 0 mul, 1 exp, 2 add  | 3 matmul (not fusible) | 4 tanh(2), 5 sub(4, 1): op 1 is read by
  // op 5, after op 2's group, so the first group ends at 1 and op 2 stands alone.
  ir::FunctionDef fn{"f", {kT, ir::TensorType{DType::kF32, {5, 5}, {-1, -1}}}, {}, {}, {}, {}};
  fn.ops = {{OpCode::kMul, {ChainInput(0), ChainScalar(2)}, 0, kT},
            {OpCode::kExp, {ChainOp(0)}, 0, kT},
            {OpCode::kAdd, {ChainOp(1), ChainInput(0)}, 0, kT},
            {OpCode::kMatmul, {ChainOp(2), ChainInput(1)}, 0, kT},
            {OpCode::kTanh, {ChainOp(2)}, 0, kT},
            {OpCode::kSub, {ChainOp(4), ChainOp(1)}, 0, kT}};
  fn.outputs = {ChainOp(5), ChainOp(3)};
  std::vector<size_t> last_use = {1, 5, 4, 6, 5, 6};
  const std::vector<size_t> end = FusedGroups(fn, last_use);
  EXPECT_EQ(end, (std::vector<size_t>{1, 1, 2, 3, 5, 5}));
  EXPECT_EQ(FusedGroupInputs(fn, 4, 5), (std::vector<Operand>{ChainOp(2), ChainOp(1)}));
}

TEST(FusionTest, AFusedRunGivesTheOpByOpRunsBits) {
  std::mt19937 rng(7);
  const OpCode codes[] = {OpCode::kAdd,  OpCode::kSub, OpCode::kMul,  OpCode::kDiv, OpCode::kExp,
                          OpCode::kTanh, OpCode::kNeg, OpCode::kSqrt, OpCode::kRelu};
  for (int round = 0; round < 200; ++round) {
    ir::FunctionDef fn{"chain", {kT, kT}, {}, {}, {}, {}};
    const int n = 2 + static_cast<int>(rng() % 10);
    auto any_value = [&](int before) {
      const int k = static_cast<int>(rng() % static_cast<unsigned>(before + 3));
      if (k == before + 2) return ChainScalar(0.5 + static_cast<double>(rng() % 5));
      return k < 2 ? ChainInput(k) : ChainOp(k - 2);
    };
    for (int i = 0; i < n; ++i) {
      const OpCode code = codes[rng() % std::size(codes)];
      Operand a = any_value(i);
      if (a.kind == Operand::kScalar) a = ChainInput(0);
      if (ir::IsUnaryOp(code)) {
        fn.ops.push_back({code, {a}, 0, kT});
      } else {
        Operand b = any_value(i);
        if (rng() % 2 != 0) std::swap(a, b);
        fn.ops.push_back({code, {a, b}, 0, kT});
      }
    }
    fn.outputs = {ChainOp(n - 1)};
    if (rng() % 2 != 0) fn.outputs.push_back(ChainOp(static_cast<int32_t>(rng() % n)));
    ASSERT_THAT(ir::Validate(fn, 1), IsOk());
    EXPECT_EQ(ExpectFusedGivesOpByOpBits(fn, DrawInputs(fn, rng), round), n);
  }
}

// broadcast_in_dim(x, kT's shape, dims) as an op, and its type.
ir::Op BroadcastOp(Operand x, std::vector<int64_t> dims) {
  std::vector<int64_t> params = kT.shape;
  params.insert(params.end(), dims.begin(), dims.end());
  return {OpCode::kBroadcastInDim, {x}, 0, kT, params};
}

TEST(FusionTest, BroadcastsJoinTheChainAndTheirOperandIsMadeFirst) {
  // 0 exp(in1 [6,1]) | 1 broadcast(0), 2 sub(in0, 1), 3 broadcast(in2 [5]), 4 mul(2, 3):
  // op 0 has the operand's shape, so it is made before the group of 1 to 4 starts.
  const ir::TensorType column{DType::kF32, {6, 1}, {-1, -1}};
  const ir::TensorType row{DType::kF32, {5}, {-1}};
  ir::FunctionDef fn{"f", {kT, column, row}, {}, {}, {}, {}};
  fn.ops = {{OpCode::kExp, {ChainInput(1)}, 0, column},
            BroadcastOp(ChainOp(0), {0, 1}),
            {OpCode::kSub, {ChainInput(0), ChainOp(1)}, 0, kT},
            BroadcastOp(ChainInput(2), {1}),
            {OpCode::kMul, {ChainOp(2), ChainOp(3)}, 0, kT}};
  fn.outputs = {ChainOp(4)};
  ASSERT_THAT(ir::Validate(fn, 1), IsOk());
  const std::vector<size_t> end = FusedGroups(fn, {1, 2, 4, 4, 5});
  EXPECT_EQ(end, (std::vector<size_t>{0, 4, 2, 3, 4}));
  EXPECT_EQ(FusedGroupInputs(fn, 1, 4),
            (std::vector<Operand>{ChainOp(0), ChainInput(0), ChainInput(2)}));
}

TEST(FusionTest, AFusedRunWithBroadcastsGivesTheOpByOpRunsBits) {
  std::mt19937 rng(11);
  // Inputs: kT itself, then shapes that broadcast into it along these dims.
  const std::vector<std::pair<Shape, std::vector<int64_t>>> small = {
      {{5}, {1}}, {{6, 1}, {0, 1}}, {{6}, {0}}, {{}, {}}, {{1, 5}, {0, 1}}};
  const OpCode codes[] = {OpCode::kAdd, OpCode::kSub, OpCode::kMul,
                          OpCode::kDiv, OpCode::kExp, OpCode::kTanh};
  for (int round = 0; round < 200; ++round) {
    ir::FunctionDef fn{"chain", {kT}, {}, {}, {}, {}};
    for (const auto& [shape, dims] : small) {
      fn.inputs.push_back({DType::kF32, shape, std::vector<int32_t>(shape.size(), -1)});
    }
    std::vector<Operand> full = {ChainInput(0)};  // values of kT so far
    const int n = 3 + static_cast<int>(rng() % 10);
    for (int i = 0; i < n; ++i) {
      const auto at = static_cast<int32_t>(fn.ops.size());
      if (rng() % 3 == 0) {  // a broadcast of an input, or of a unary op on it made just before
        const auto k = static_cast<int32_t>(rng() % small.size());
        Operand x = ChainInput(k + 1);
        if (rng() % 2 != 0) {
          fn.ops.push_back({OpCode::kTanh, {x}, 0, fn.inputs[k + 1]});
          x = ChainOp(at);
        }
        fn.ops.push_back(BroadcastOp(x, small[k].second));
      } else {
        const OpCode code = codes[rng() % std::size(codes)];
        const Operand a = full[rng() % full.size()];
        if (ir::IsUnaryOp(code)) {
          fn.ops.push_back({code, {a}, 0, kT});
        } else {
          fn.ops.push_back({code, {a, full[rng() % full.size()]}, 0, kT});
        }
      }
      full.push_back(ChainOp(static_cast<int32_t>(fn.ops.size() - 1)));
    }
    fn.outputs = {full.back()};
    if (rng() % 2 != 0) fn.outputs.push_back(full[rng() % full.size()]);
    ASSERT_THAT(ir::Validate(fn, 1), IsOk());
    ExpectFusedGivesOpByOpBits(fn, DrawInputs(fn, rng), round);
  }
}

}  // namespace
}  // namespace atl::compute
