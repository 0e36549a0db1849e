// The structured ops' rules (while, scan, cond, tuple_element) and what Validate checks of
// bodies: the types a body must take and give, the refusals that name the body and what was
// expected, nesting and collectives, and that bodies travel in the wire encoding. Their
// values are checked against JAX in tests/python/test_lax_control.py.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <msgpack.hpp>

#include "common/ir/ir.h"
#include "tests/status_matchers.h"

namespace atl::ir {
namespace {

TensorType Typed(DType dtype, Shape shape, std::vector<int32_t> split = {}) {
  if (split.empty()) split.assign(shape.size(), -1);
  return {dtype, std::move(shape), std::move(split)};
}

Operand In(int32_t i) { return {Operand::kInput, i, 0.0}; }
Operand OpAt(int32_t i) { return {Operand::kOp, i, 0.0}; }

// A body of `inputs` whose outputs are its inputs `outputs`.
FunctionDef Passing(std::vector<TensorType> inputs, std::vector<int32_t> outputs) {
  FunctionDef body{"pass", std::move(inputs), {}, {}, {}, {}};
  for (int32_t o : outputs) body.outputs.push_back(In(o));
  return body;
}

// Appends op `name` over `operands` to `fn`, its type inferred.
void Append(FunctionDef& fn, std::string_view name, std::vector<Operand> operands,
            std::vector<int64_t> params = {}) {
  Op op(*OpCodeNamed(name), std::move(operands), 0, {}, std::move(params));
  auto type = InferType(fn, op);
  op.type = type.ok() ? *type : TensorType{};
  fn.ops.push_back(std::move(op));
}

// A body of `inputs` giving a bool[]: whether any element of input 0 is greater than itself.
FunctionDef Predicate(std::vector<TensorType> inputs) {
  FunctionDef cond{"cond", std::move(inputs), {}, {}, {}, {}};
  std::vector<int64_t> axes;
  for (size_t d = 0; d < cond.inputs[0].shape.size(); ++d) axes.push_back(static_cast<int64_t>(d));
  Append(cond, "gt", {In(0), In(0)});
  Append(cond, "reduce_or", {OpAt(0)}, axes);
  cond.outputs.push_back(OpAt(1));
  return cond;
}

// A function of `inputs` whose one op is `name` over all of them, with `bodies`.
FunctionDef WithOp(std::vector<TensorType> inputs, std::string_view name,
                   std::vector<FunctionDef> bodies, std::vector<int64_t> params) {
  FunctionDef fn{"f", std::move(inputs), {}, {}, {}, {}};
  fn.bodies = std::move(bodies);
  std::vector<Operand> operands;
  for (size_t i = 0; i < fn.inputs.size(); ++i) operands.push_back(In(static_cast<int32_t>(i)));
  Append(fn, name, std::move(operands), std::move(params));
  fn.outputs.push_back(OpAt(0));
  return fn;
}

void ExpectRefusal(const Status& s, std::vector<std::string> says) {
  ASSERT_FALSE(s.ok()) << "accepted";
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  for (const std::string& text : says) {
    EXPECT_NE(s.message().find(text), std::string::npos)
        << s.ToString() << " does not say " << text;
  }
}

TEST(ControlTypeTest, AWhileLoopGivesItsCarryAndTupleElementReadsEachResult) {
  const TensorType x = Typed(DType::kF32, {4, 3}), n = Typed(DType::kI32, {});
  FunctionDef fn =
      WithOp({x, n}, "while", {Predicate({x, n}), Passing({x, n}, {0, 1})}, {0, 1, 0, 0});
  ASSERT_THAT(Validate(fn, 1), IsOk());
  EXPECT_EQ(fn.ops[0].type, x);
  const auto results = ResultTypes(fn, fn.ops[0]);
  ASSERT_THAT(results, IsOk());
  EXPECT_EQ(*results, (std::vector<TensorType>{x, n}));
  Op second(OpCode::kTupleElement, {OpAt(0)}, 0, {}, {1});
  EXPECT_EQ(*InferType(fn, second), n);
  second.params = {2};
  ExpectRefusal(InferType(fn, second).status(), {"tuple_element", "result 2", "has 2"});
  Op of_input(OpCode::kTupleElement, {In(0)}, 0, {}, {0});
  ExpectRefusal(InferType(fn, of_input).status(), {"while, scan or cond"});
}

TEST(ControlTypeTest, ALoopWhoseCarryChangesOrWhoseCondIsNotABoolIsRefused) {
  const TensorType x = Typed(DType::kF32, {4, 3});
  FunctionDef grows = Passing({x}, {0});
  grows.outputs.clear();
  grows.ops.push_back(Op(*OpCodeNamed("reshape"), {In(0)}, 0, Typed(DType::kF32, {3, 4}), {3, 4}));
  grows.outputs.push_back(OpAt(0));
  ExpectRefusal(Validate(WithOp({x}, "while", {Predicate({x}), grows}, {0, 1, 0, 0}), 1),
                {"while", "carry may not change", "f32[3,4]"});
  ExpectRefusal(
      Validate(WithOp({x}, "while", {Passing({x}, {0}), Passing({x}, {0})}, {0, 1, 0, 0}), 1),
      {"must give one bool[]"});
  ExpectRefusal(Validate(WithOp({x}, "while", {Predicate({x})}, {0, 1, 0, 0}), 1),
                {"body 1 does not exist"});
  ExpectRefusal(Validate(WithOp({x}, "while", {Predicate({x}), Passing({x}, {0})}, {0, 1}), 1),
                {"4 values"});
}

TEST(ControlTypeTest, AScanStacksItsYsAndRefusesXsCutAlongTheScannedDimension) {
  const TensorType carry = Typed(DType::kF32, {2}), xs = Typed(DType::kF32, {5, 2});
  const TensorType x = Typed(DType::kF32, {2});
  FunctionDef body = Passing({carry, x}, {0, 1});
  FunctionDef fn = WithOp({carry, xs}, "scan", {body}, {0, 1, 0, 5, 0});
  ASSERT_THAT(Validate(fn, 1), IsOk());
  EXPECT_EQ(*ResultTypes(fn, fn.ops[0]), (std::vector<TensorType>{carry, xs}));
  ExpectRefusal(Validate(WithOp({carry, xs}, "scan", {body}, {0, 1, 0, 4, 0}), 1),
                {"xs 0 must have 4 rows"});
  FunctionDef split_fn{"f", {carry, Typed(DType::kF32, {4, 2}, {0, -1})}, {}, {}, {2}, {}};
  split_fn.bodies = {body};
  Op op(OpCode::kScan, {In(0), In(1)}, 0, {}, {0, 1, 0, 4, 0});
  ExpectRefusal(InferType(split_fn, op).status(), {"mesh axis 0", "scanned dimension 0"});
}

TEST(ControlTypeTest, CondBranchesTakeTheArgsThenTheirConstsAndGiveOneType) {
  const TensorType x = Typed(DType::kF32, {3}), k = Typed(DType::kF32, {3}),
                   i = Typed(DType::kI32, {});
  FunctionDef with_const = Passing({x, k}, {1});
  FunctionDef fn = WithOp({i, x, k}, "cond", {Passing({x}, {0}), with_const}, {0, 1, 0, 1});
  ASSERT_THAT(Validate(fn, 1), IsOk());
  EXPECT_EQ(fn.ops[0].type, x);
  ExpectRefusal(
      Validate(WithOp({i, x, k}, "cond", {Passing({x}, {0}), with_const}, {0, 1, 1, 0}), 1),
      {"branch 0", "must take"});
  ExpectRefusal(Validate(WithOp({x, x}, "cond", {Passing({x}, {0})}, {0, 0}), 1),
                {"index must be an i32[] or bool[]"});
}

TEST(ControlTypeTest, BodiesMayNotHoldCollectivesNorNestWithoutEnd) {
  const TensorType x = Typed(DType::kF32, {4});
  FunctionDef reducing{"body", {x}, {}, {}, {}, {}};
  reducing.ops.push_back(Op(OpCode::kAllReduceMax, {In(0)}, 0, x));
  reducing.outputs.push_back(OpAt(0));
  FunctionDef fn = WithOp({x}, "while", {Predicate({x}), reducing}, {0, 1, 0, 0});
  fn.mesh = {2};
  ExpectRefusal(Validate(fn, 2), {"body 1", "collective", "may not hold one"});

  const TensorType y = Typed(DType::kF32, {2});
  FunctionDef nested = Passing({y}, {0});
  for (int depth = 0; depth <= kMaxBodyDepth; ++depth) {
    nested = WithOp({y}, "while", {Predicate({y}), nested}, {0, 1, 0, 0});
  }
  ExpectRefusal(Validate(nested, 1), {"nest deeper than"});
}

TEST(ControlTypeTest, BodiesTravelInTheWireEncoding) {
  const TensorType x = Typed(DType::kF32, {4, 3});
  const FunctionDef fn = WithOp({x}, "while", {Predicate({x}), Passing({x}, {0})}, {0, 1, 0, 0});
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, fn);
  const msgpack::object_handle handle = msgpack::unpack(buffer.data(), buffer.size());
  EXPECT_EQ(handle.get().as<FunctionDef>(), fn);
}

}  // namespace
}  // namespace atl::ir
