// RunFunction on hand-built FunctionDefs, shard by shard, against whole-tensor references.
#include "compute/interpreter.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/ir/ir.h"
#include "compute/backend_cpu.h"
#include "compute/backend_sim.h"
#include "tests/kernels/shards.h"
#include "tests/kernels/test_tensors.h"
#include "tests/status_matchers.h"

namespace atl::compute {
namespace {

using ir::OpCode;
using testutil::Assemble;
using testutil::Input;
using testutil::RandomF32;
using testutil::RandomF32Divisor;
using testutil::RandomI32;
using testutil::ShardOf;
using testutil::SplitDim;
using testutil::Type;

ir::Operand OpResult(int32_t i) { return {ir::Operand::kOp, i, 0.0}; }
ir::Operand Scalar(double v) { return {ir::Operand::kScalar, 0, v}; }
ir::Op MakeOp(OpCode code, std::vector<ir::Operand> operands, ir::TensorType type,
              double attr = 0.0) {
  return ir::Op{code, std::move(operands), attr, std::move(type)};
}

// `x op scalar` over one input of type `type`.
ir::FunctionDef ScalarFunction(std::string name, OpCode code, double scalar,
                               const ir::TensorType& type) {
  ir::FunctionDef fn;
  fn.name = std::move(name);
  fn.inputs = {type};
  fn.ops = {MakeOp(code, {Input(0), Scalar(scalar)}, type)};
  fn.outputs = {OpResult(0)};
  return fn;
}

// Runs `fn` on every shard; inputs are cut from the global tensors, output `output` is
// reassembled into its global shape.
std::vector<Tensor> RunOnAllShards(const ir::FunctionDef& fn, int num_shards,
                                   const std::vector<Tensor>& globals) {
  EXPECT_THAT(ir::Validate(fn, num_shards), IsOk());
  const std::vector<ir::TensorType> out_types = ir::OutputTypes(fn);
  std::vector<std::vector<Tensor>> per_output(out_types.size());
  for (int s = 0; s < num_shards; ++s) {
    std::vector<Tensor> local;
    for (size_t i = 0; i < globals.size(); ++i) {
      local.push_back(ShardOf(globals[i], SplitDim(fn.inputs[i]), s, num_shards));
    }
    auto outs = RunFunction(fn, s, num_shards, std::move(local));
    EXPECT_THAT(outs, IsOk());
    if (!outs.ok()) return {};
    EXPECT_EQ(outs->size(), out_types.size());
    for (size_t o = 0; o < out_types.size() && o < outs->size(); ++o) {
      per_output[o].push_back((*outs)[o]);
    }
  }
  std::vector<Tensor> result;
  for (size_t o = 0; o < out_types.size(); ++o) {
    result.push_back(SplitDim(out_types[o]) < 0
                         ? per_output[o][0]
                         : Assemble(per_output[o], SplitDim(out_types[o]), out_types[o].shape));
  }
  return result;
}

// Applies `f` to each element of an f32 tensor.
template <typename F>
Tensor MapF32(const Tensor& t, F f) {
  Tensor out(DType::kF32, t.shape());
  for (int64_t i = 0; i < t.num_elements(); ++i) out.as<float>()[i] = f(t.as<float>()[i]);
  return out;
}

// The Pathways paper, Figure 2: a(x) = x * 2, b(x) = x + 1, c(x) = x / 2, each a sharded
// computation, chained a -> b -> c on every shard.
TEST(InterpreterTest, PaperFigure2FunctionsShardByShard) {
  constexpr int kShards = 4;
  const ir::TensorType type = Type(DType::kF32, {16, 3}, 0);
  const ir::FunctionDef a = ScalarFunction("a", OpCode::kMul, 2, type);
  const ir::FunctionDef b = ScalarFunction("b", OpCode::kAdd, 1, type);
  const ir::FunctionDef c = ScalarFunction("c", OpCode::kDiv, 2, type);
  for (const auto* fn : {&a, &b, &c}) ASSERT_THAT(ir::Validate(*fn, kShards), IsOk());

  std::mt19937 rng(10);
  const Tensor x = RandomF32(rng, {16, 3});
  std::vector<Tensor> shards;
  for (int s = 0; s < kShards; ++s) {
    Tensor local = ShardOf(x, 0, s, kShards);
    for (const auto* fn : {&a, &b, &c}) {
      std::vector<Tensor> in;
      in.push_back(std::move(local));
      ATOLL_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, RunFunction(*fn, s, kShards, in));
      ASSERT_EQ(out.size(), 1u);
      local = std::move(out[0]);
    }
    shards.push_back(std::move(local));
  }
  EXPECT_EQ(Assemble(shards, 0, {16, 3}), MapF32(x, [](float v) { return (v * 2 + 1) / 2; }));
}

TEST(InterpreterTest, SplitAlongASecondDimension) {
  const ir::TensorType type = Type(DType::kF32, {3, 8}, 1);
  const ir::FunctionDef fn = ScalarFunction("sub_from", OpCode::kSub, 0.5, type);
  std::mt19937 rng(11);
  const Tensor x = RandomF32(rng, {3, 8});
  const std::vector<Tensor> out = RunOnAllShards(fn, 2, {x});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], MapF32(x, [](float v) { return v - 0.5f; }));
}

TEST(InterpreterTest, ChainOfOpsWithScalarsOnBothSidesAndSeveralOutputs) {
  // f(x, y) = ((1 - (x + y) * 3) / y) spun for 100 us; outputs: that, (x + y) * 3, x, that.
  const ir::TensorType t = Type(DType::kF32, {8, 4}, 0);
  ir::FunctionDef fn;
  fn.name = "chain";
  fn.inputs = {t, t};
  fn.ops = {MakeOp(OpCode::kAdd, {Input(0), Input(1)}, t),
            MakeOp(OpCode::kMul, {OpResult(0), Scalar(3)}, t),
            MakeOp(OpCode::kSub, {Scalar(1), OpResult(1)}, t),
            MakeOp(OpCode::kDiv, {OpResult(2), Input(1)}, t),
            MakeOp(OpCode::kSpin, {OpResult(3)}, t, 100)};
  fn.outputs = {OpResult(4), OpResult(1), Input(0), OpResult(4)};

  std::mt19937 rng(12);
  const Tensor x = RandomF32(rng, {8, 4});
  const Tensor y = RandomF32Divisor(rng, {8, 4});
  const std::vector<Tensor> out = RunOnAllShards(fn, 2, {x, y});
  ASSERT_EQ(out.size(), 4u);
  Tensor want(DType::kF32, {8, 4});
  Tensor tripled(DType::kF32, {8, 4});
  for (int64_t i = 0; i < 32; ++i) {
    const float xi = x.as<float>()[i];
    const float yi = y.as<float>()[i];
    tripled.as<float>()[i] = (xi + yi) * 3.0f;
    want.as<float>()[i] = (1.0f - tripled.as<float>()[i]) / yi;
  }
  EXPECT_EQ(out[0], want);
  EXPECT_EQ(out[1], tripled);
  EXPECT_EQ(out[2], x);
  EXPECT_EQ(out[3], want);
}

TEST(InterpreterTest, I32Function) {
  // (x * 3 + 7) / 2 over i32[6] on 3 shards.
  const ir::TensorType t = Type(DType::kI32, {6}, 0);
  ir::FunctionDef fn;
  fn.name = "ints";
  fn.inputs = {t};
  fn.ops = {MakeOp(OpCode::kMul, {Input(0), Scalar(3)}, t),
            MakeOp(OpCode::kAdd, {OpResult(0), Scalar(7)}, t),
            MakeOp(OpCode::kDiv, {OpResult(1), Scalar(2)}, t)};
  fn.outputs = {OpResult(2)};
  std::mt19937 rng(13);
  const Tensor x = RandomI32(rng, {6});
  const std::vector<Tensor> out = RunOnAllShards(fn, 3, {x});
  ASSERT_EQ(out.size(), 1u);
  Tensor want(DType::kI32, {6});
  for (int i = 0; i < 6; ++i) want.as<int32_t>()[i] = (x.as<int32_t>()[i] * 3 + 7) / 2;
  EXPECT_EQ(out[0], want);
}

TEST(InterpreterTest, MatmulWithBiasOnRowShards) {
  // y = x @ w + bias: x and bias split by rows over 4 shards, w replicated.
  ir::FunctionDef fn;
  fn.name = "dense";
  fn.inputs = {Type(DType::kF32, {8, 5}, 0), Type(DType::kF32, {5, 3}),
               Type(DType::kF32, {8, 3}, 0)};
  fn.ops = {MakeOp(OpCode::kMatmul, {Input(0), Input(1)}, Type(DType::kF32, {8, 3}, 0)),
            MakeOp(OpCode::kAdd, {OpResult(0), Input(2)}, Type(DType::kF32, {8, 3}, 0))};
  fn.outputs = {OpResult(1)};
  std::mt19937 rng(14);
  const Tensor x = RandomF32(rng, {8, 5});
  const Tensor w = RandomF32(rng, {5, 3});
  const Tensor bias = RandomF32(rng, {8, 3});
  const std::vector<Tensor> out = RunOnAllShards(fn, 4, {x, w, bias});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].shape(), (Shape{8, 3}));
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 3; ++j) {
      double want = bias.as<float>()[i * 3 + j];
      for (int p = 0; p < 5; ++p)
        want += double{x.as<float>()[i * 5 + p]} * w.as<float>()[p * 3 + j];
      EXPECT_NEAR(out[0].as<float>()[i * 3 + j], want, 1e-4) << i << "," << j;
    }
  }
}

TEST(InterpreterTest, SpinKeepsTheShardBusy) {
  const ir::TensorType t = Type(DType::kF32, {4}, 0);
  ir::FunctionDef fn;
  fn.name = "busy";
  fn.inputs = {t};
  fn.ops = {MakeOp(OpCode::kSpin, {Input(0)}, t, 5000)};
  fn.outputs = {OpResult(0)};
  const Tensor x = Tensor::F32({2}, {1, 2});
  const auto start = std::chrono::steady_clock::now();
  ATOLL_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, RunFunction(fn, 1, 2, {x}));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::microseconds(5000));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], x);
}

TEST(InterpreterTest, ACancelledShardStopsInsideItsSpinAndBeforeItsNextOp) {
  const ir::TensorType t = Type(DType::kF32, {4}, 0);
  ir::FunctionDef fn;
  fn.name = "long";
  fn.inputs = {t};
  constexpr double kSpinUs = 60e6;
  fn.ops = {MakeOp(OpCode::kSpin, {Input(0)}, t, kSpinUs),
            MakeOp(OpCode::kMul, {OpResult(0), Scalar(2)}, t)};
  fn.outputs = {OpResult(1)};
  const Tensor x = Tensor::F32({2}, {1, 2});
  const std::chrono::duration<double, std::micro> kPrompt(kSpinUs / 10);
  for (Backend* backend :
       {static_cast<Backend*>(&CpuBackend::Get()), static_cast<Backend*>(&SimBackend::Get())}) {
    std::atomic<bool> cancelled{false};
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // mid-spin
      cancelled = true;
    });
    const auto start = std::chrono::steady_clock::now();
    Status s = RunFunction(fn, 0, 2, {x}, *backend, nullptr, &cancelled).status();
    const auto took = std::chrono::steady_clock::now() - start;
    canceller.join();
    EXPECT_EQ(s.code(), Code::kCancelled) << backend->name() << ": " << s.ToString();
    EXPECT_NE(s.message().find("op 0 (spin)"), std::string::npos) << s.ToString();
    EXPECT_LT(took, kPrompt) << backend->name();
  }
  // Set before it starts: no op runs.
  std::atomic<bool> already{true};
  Status s = RunFunction(fn, 0, 2, {x}, CpuBackend::Get(), nullptr, &already).status();
  EXPECT_EQ(s.code(), Code::kCancelled);
  EXPECT_NE(s.message().find("cancelled before it ran"), std::string::npos) << s.ToString();
}

// ---------------------------------------------------------------------------------------
// Errors.

const ir::FunctionDef& Doubler() {
  static const ir::FunctionDef fn =
      ScalarFunction("a", OpCode::kMul, 2, Type(DType::kF32, {16}, 0));
  return fn;
}

TEST(InterpreterErrorTest, WrongInputShapeNamesInputAndShapes) {
  // The global tensor instead of this shard's quarter of it.
  const Status s = RunFunction(Doubler(), 0, 4, {Tensor(DType::kF32, {16})}).status();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("input 0"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("f32[4]"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("f32[16]"), std::string::npos) << s.ToString();
}

TEST(InterpreterErrorTest, WrongInputDTypeOrCount) {
  const Status dtype = RunFunction(Doubler(), 0, 4, {Tensor(DType::kI32, {4})}).status();
  EXPECT_EQ(dtype.code(), Code::kInvalidArgument);
  EXPECT_NE(dtype.message().find("i32[4]"), std::string::npos) << dtype.ToString();
  EXPECT_EQ(RunFunction(Doubler(), 0, 4, {}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(RunFunction(Doubler(), 0, 4, {Tensor(DType::kF32, {4}), Tensor(DType::kF32, {4})})
                .status()
                .code(),
            Code::kInvalidArgument);
}

TEST(InterpreterErrorTest, ShardOutOfRange) {
  for (auto [shard, num_shards] : {std::pair{4, 4}, {-1, 4}, {0, 0}}) {
    EXPECT_EQ(RunFunction(Doubler(), shard, num_shards, {Tensor(DType::kF32, {4})}).status().code(),
              Code::kInvalidArgument)
        << shard << " of " << num_shards;
  }
}

TEST(InterpreterErrorTest, KernelErrorCarriesTheOp) {
  const ir::TensorType t = Type(DType::kI32, {4});
  ir::FunctionDef fn;
  fn.name = "bad_div";
  fn.inputs = {t, t};
  fn.ops = {MakeOp(OpCode::kAdd, {Input(0), Input(1)}, t),
            MakeOp(OpCode::kDiv, {Input(0), Input(1)}, t)};
  fn.outputs = {OpResult(1)};
  const Status s =
      RunFunction(fn, 0, 1, {Tensor::I32({4}, {1, 2, 3, 4}), Tensor::I32({4}, {1, 0, 1, 1})})
          .status();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("op 1 (div)"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("division by zero"), std::string::npos) << s.ToString();
}

// Functions that never passed ir::Validate: RunFunction must refuse them, not crash.
TEST(InterpreterErrorTest, InvalidFunctionsAreRefused) {
  const ir::TensorType t = Type(DType::kF32, {4});
  const std::vector<Tensor> x = {Tensor(DType::kF32, {4})};
  auto base = [&] {
    ir::FunctionDef fn;
    fn.name = "broken";
    fn.inputs = {t};
    fn.ops = {MakeOp(OpCode::kAdd, {Input(0), Input(0)}, t)};
    fn.outputs = {OpResult(0)};
    return fn;
  };
  std::vector<std::pair<std::string, ir::FunctionDef>> cases;
  cases.emplace_back("forward reference", base());
  cases.back().second.ops[0].operands[1] = OpResult(0);
  cases.emplace_back("input out of range", base());
  cases.back().second.ops[0].operands[1] = Input(3);
  cases.emplace_back("negative op index", base());
  cases.back().second.ops[0].operands[0] = OpResult(-1);
  cases.emplace_back("unknown operand kind", base());
  cases.back().second.ops[0].operands[0].kind = 9;
  cases.emplace_back("output out of range", base());
  cases.back().second.outputs = {OpResult(1)};
  cases.emplace_back("scalar output", base());
  cases.back().second.outputs = {Scalar(1)};
  cases.emplace_back("unknown op code", base());
  cases.back().second.ops[0].code = static_cast<OpCode>(99);
  cases.emplace_back("two scalars", base());
  cases.back().second.ops[0].operands = {Scalar(1), Scalar(2)};
  cases.emplace_back("too few operands", base());
  cases.back().second.ops[0].operands = {Input(0)};
  cases.emplace_back("matmul of a scalar", base());
  cases.back().second.ops[0] = MakeOp(OpCode::kMatmul, {Input(0), Scalar(1)}, t);
  cases.emplace_back("declared type is wrong", base());
  cases.back().second.ops[0].type = Type(DType::kF32, {5});
  cases.emplace_back("declared dtype is wrong", base());
  cases.back().second.ops[0].type = Type(DType::kI32, {4});
  for (const auto& [what, fn] : cases) {
    EXPECT_FALSE(ir::Validate(fn, 1).ok()) << what;
    EXPECT_EQ(RunFunction(fn, 0, 1, x).status().code(), Code::kInvalidArgument) << what;
  }
}

// ---------------------------------------------------------------------------------------
// The Backend seam.

// Delegates to the cpu backend and records what it was asked to run.
class RecordingBackend : public Backend {
 public:
  std::string_view name() const override { return "recording"; }
  Result<Tensor> Run(const ir::Op& op, std::span<const Tensor* const> operands) override {
    std::string call(ir::OpName(op.code));
    for (const Tensor* t : operands) call += t == nullptr ? " scalar" : " tensor";
    calls.push_back(call);
    return CpuBackend::Get().Run(op, operands);
  }
  std::vector<std::string> calls;
};

class FailingBackend : public Backend {
 public:
  std::string_view name() const override { return "failing"; }
  Result<Tensor> Run(const ir::Op&, std::span<const Tensor* const>) override {
    return Unavailable("device lost");
  }
};

// Returns a result of the wrong shape, as a buggy backend might.
class WrongShapeBackend : public Backend {
 public:
  std::string_view name() const override { return "wrong"; }
  Result<Tensor> Run(const ir::Op&, std::span<const Tensor* const>) override {
    return Tensor(DType::kF32, {1});
  }
};

TEST(BackendTest, RunFunctionUsesTheGivenBackend) {
  const ir::TensorType t = Type(DType::kF32, {4}, 0);
  ir::FunctionDef fn;
  fn.name = "f";
  fn.inputs = {t};
  fn.ops = {MakeOp(OpCode::kSub, {Scalar(1), Input(0)}, t),
            MakeOp(OpCode::kMul, {OpResult(0), Input(0)}, t),
            MakeOp(OpCode::kSpin, {OpResult(1)}, t, 0)};
  fn.outputs = {OpResult(2)};
  RecordingBackend backend;
  ATOLL_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out,
                             RunFunction(fn, 0, 2, {Tensor::F32({2}, {3, 4})}, backend));
  EXPECT_EQ(backend.calls,
            (std::vector<std::string>{"sub scalar tensor", "mul tensor tensor", "spin tensor"}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], Tensor::F32({2}, {-6, -12}));
}

TEST(BackendTest, BackendErrorsKeepTheirCodeAndGainContext) {
  FailingBackend backend;
  const Status s = RunFunction(Doubler(), 0, 4, {Tensor(DType::kF32, {4})}, backend).status();
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.message().find("device lost"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("failing"), std::string::npos) << s.ToString();
}

TEST(BackendTest, ResultOfTheWrongShapeIsRefused) {
  WrongShapeBackend backend;
  const Status s = RunFunction(Doubler(), 0, 4, {Tensor(DType::kF32, {4})}, backend).status();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("declares"), std::string::npos) << s.ToString();
}

TEST(BackendTest, CpuBackendIsNamedCpu) { EXPECT_EQ(CpuBackend::Get().name(), "cpu"); }

}  // namespace
}  // namespace atl::compute
