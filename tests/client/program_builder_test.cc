// Tracing: what a ProgramBuilder records for calls, arguments, routes and results, and the
// InvalidArgument it gives, naming the call, for values it does not know, calls of the
// wrong arity and arguments of the wrong type.
#include "atoll/program.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/client/registered_function.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

using ::testing::HasSubstr;

bool SameValue(const Traced& a, const Traced& b) {
  return a.kind == b.kind && a.index == b.index && a.output == b.output;
}

class ProgramBuilderTest : public ::testing::Test {
 protected:
  const ir::TensorType f32x4_ = ir::SplitType(DType::kF32, {4}, 0);
  const proto::SliceInfo slice_ = test::SliceOn(1, "tcp://sched", {{"h0"}, {"h1"}});
  const Function a_ = test::Registered(11, test::PassThrough("a", {f32x4_}), slice_);
  const Function b_ = test::Registered(12, test::PassThrough("b", {f32x4_}), slice_);
  const Function c_ = test::Registered(13, test::PassThrough("c", {f32x4_}), slice_);
  // Two inputs, two outputs: rows f32[4,2] and their destinations i32[4].
  const Function gate_ = test::Registered(
      14,
      test::PassThrough(
          "gate", {ir::SplitType(DType::kF32, {4, 2}, 0), ir::SplitType(DType::kI32, {4}, 0)}),
      slice_);
};

// Status of a builder's program, which must have failed.
Status BuildError(const ProgramBuilder& p) {
  auto built = p.Build();
  return built.ok() ? Status::Ok() : built.status();
}

TEST_F(ProgramBuilderTest, RecordsThePaperFigureTwoProgram) {
  ProgramBuilder p;
  Traced v = p.Arg(DType::kF32, {4});
  Traced x = p.Call(a_, {v})[0];
  Traced y = p.Call(b_, {v})[0];
  Traced cx = p.Call(c_, {x})[0];
  Traced z = p.Call(a_, {cx})[0];
  p.Return({y, z});
  auto program = p.Build();
  ASSERT_THAT(program, IsOk());
  EXPECT_EQ(program->num_nodes(), 4u);
  EXPECT_EQ(program->num_args(), 1u);
  EXPECT_EQ(program->num_results(), 2u);

  const Program::Impl* impl = HandleAccess::ImplOf(*program);
  ASSERT_NE(impl, nullptr);
  // The argument is replicated until a call says how it is cut.
  ASSERT_EQ(impl->args.size(), 1u);
  EXPECT_EQ(impl->args[0], ir::SplitType(DType::kF32, {4}, -1));
  ASSERT_EQ(impl->calls.size(), 4u);
  const std::vector<std::string> names = {"a", "b", "c", "a"};
  for (size_t k = 0; k < names.size(); ++k) EXPECT_EQ(impl->calls[k].fn->def.name, names[k]);
  EXPECT_TRUE(SameValue(impl->calls[0].args.at(0), {kTracedArg, 0, 0}));
  EXPECT_TRUE(SameValue(impl->calls[1].args.at(0), {kTracedArg, 0, 0}));
  EXPECT_TRUE(SameValue(impl->calls[2].args.at(0), {kTracedCall, 0, 0}));
  EXPECT_TRUE(SameValue(impl->calls[3].args.at(0), {kTracedCall, 2, 0}));
  ASSERT_EQ(impl->results.size(), 2u);
  EXPECT_TRUE(SameValue(impl->results[0], {kTracedCall, 1, 0}));
  EXPECT_TRUE(SameValue(impl->results[1], {kTracedCall, 3, 0}));
}

TEST_F(ProgramBuilderTest, ACallGivesOneValuePerOutput) {
  ProgramBuilder p;
  Traced rows = p.Arg(DType::kF32, {4, 2});
  Traced destinations = p.Arg(DType::kI32, {4});
  auto outs = p.Call(gate_, {rows, destinations});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_TRUE(SameValue(outs[0], {kTracedCall, 0, 0}));
  EXPECT_TRUE(SameValue(outs[1], {kTracedCall, 0, 1}));
  p.Return({outs[1], rows});
  auto program = p.Build();
  ASSERT_THAT(program, IsOk());
  EXPECT_EQ(program->num_results(), 2u);
}

TEST_F(ProgramBuilderTest, ABuiltProgramDoesNotChangeWithItsBuilder) {
  ProgramBuilder p;
  Traced v = p.Arg(DType::kF32, {4});
  p.Return({p.Call(a_, {v})[0]});
  auto first = p.Build();
  ASSERT_THAT(first, IsOk());
  p.Return({p.Call(b_, {v})[0]});
  auto second = p.Build();
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(first->num_nodes(), 1u);
  EXPECT_EQ(HandleAccess::ImplOf(*first)->calls[0].fn->def.name, "a");
  EXPECT_EQ(second->num_nodes(), 2u);
}

TEST_F(ProgramBuilderTest, WrongArityNamesTheCall) {
  ProgramBuilder p;
  Traced v = p.Arg(DType::kF32, {4});
  p.Call(a_, {v});
  EXPECT_TRUE(p.Call(b_, {v, v}).empty());
  Status error = BuildError(p);
  EXPECT_EQ(error.code(), Code::kInvalidArgument);
  EXPECT_EQ(error.message(), "call 1 of 'b': expected 1 argument, got 2");
}

TEST_F(ProgramBuilderTest, UnknownValuesNameTheCall) {
  ProgramBuilder other;
  other.Arg(DType::kF32, {4});
  Traced foreign = other.Call(a_, {other.Arg(DType::kF32, {4})})[0];
  for (const Traced& unknown : {Traced{}, Traced{kTracedArg, 3, 0}, Traced{kTracedCall, 0, 0},
                                foreign, Traced{kTracedRoute, 0, 0}}) {
    ProgramBuilder p;
    p.Arg(DType::kF32, {4});
    EXPECT_TRUE(p.Call(c_, {unknown}).empty());
    Status error = BuildError(p);
    EXPECT_EQ(error.code(), Code::kInvalidArgument);
    EXPECT_EQ(error.message(), "call 0 of 'c': argument 0 is not a value of this program");
  }
  ProgramBuilder p;
  Traced v = p.Arg(DType::kF32, {4});
  Traced x = p.Call(a_, {v})[0];
  p.Call(b_, {{kTracedCall, x.index, 1}});  // a has one output only
  EXPECT_THAT(BuildError(p).message(), HasSubstr("call 1 of 'b': argument 0 is not a value"));
}

TEST_F(ProgramBuilderTest, MismatchedTypesNameTheCall) {
  ProgramBuilder wrong_dtype;
  wrong_dtype.Call(a_, {wrong_dtype.Arg(DType::kI32, {4})});
  Status error = BuildError(wrong_dtype);
  EXPECT_EQ(error.code(), Code::kInvalidArgument);
  EXPECT_EQ(error.message(), "call 0 of 'a': argument 0: expected f32[4], got i32[4]");

  ProgramBuilder wrong_shape;
  wrong_shape.Call(gate_,
                   {wrong_shape.Arg(DType::kF32, {4, 2}), wrong_shape.Arg(DType::kI32, {5})});
  EXPECT_EQ(BuildError(wrong_shape).message(),
            "call 0 of 'gate': argument 1: expected i32[4], got i32[5]");
}

TEST_F(ProgramBuilderTest, TheErrorIsKnownAtTheCallThatMadeIt) {
  ProgramBuilder p;
  Traced v = p.Arg(DType::kF32, {4});
  p.Call(a_, {v});
  EXPECT_THAT(p.status(), IsOk());
  EXPECT_TRUE(p.Call(b_, {p.Arg(DType::kF32, {2, 3})}).empty());
  EXPECT_EQ(p.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(p.status().message(), "call 1 of 'b': argument 0: expected f32[4], got f32[2,3]");
}

TEST_F(ProgramBuilderTest, ArgumentsWhoseSizeCannotBeCountedAreRefused) {
  const int64_t big = int64_t{1} << 32;
  for (const Shape& shape : {Shape{4, -3}, Shape{big, big}, Shape{big, big / 8}}) {
    ProgramBuilder p;
    p.Arg(DType::kF32, {4});
    p.Arg(DType::kF32, shape);
    Status error = BuildError(p);
    EXPECT_EQ(error.code(), Code::kInvalidArgument) << ShapeString(shape);
    EXPECT_THAT(error.message(), HasSubstr("argument 1: "));
    EXPECT_THAT(error.message(), HasSubstr(ShapeString(shape)));
  }
}

TEST_F(ProgramBuilderTest, AnUnregisteredFunctionIsRefused) {
  ProgramBuilder p;
  EXPECT_TRUE(p.Call(Function{}, {p.Arg(DType::kF32, {4})}).empty());
  Status error = BuildError(p);
  EXPECT_EQ(error.code(), Code::kInvalidArgument);
  EXPECT_EQ(error.message(), "call 0: the function is not registered");
}

TEST_F(ProgramBuilderTest, TheFirstErrorStaysAndLaterCallsAreNotRecorded) {
  ProgramBuilder p;
  Traced v = p.Arg(DType::kF32, {4});
  p.Call(a_, {v, v});
  EXPECT_TRUE(p.Call(a_, {v}).empty()) << "a valid call after an error records nothing";
  p.Call(Function{}, {v});
  p.Return({v});
  EXPECT_EQ(BuildError(p).message(), "call 0 of 'a': expected 1 argument, got 2");
}

TEST_F(ProgramBuilderTest, BadResultsAreRefused) {
  ProgramBuilder nothing;
  nothing.Call(a_, {nothing.Arg(DType::kF32, {4})});
  EXPECT_EQ(BuildError(nothing).message(), "the program returns nothing");

  ProgramBuilder unknown;
  unknown.Arg(DType::kF32, {4});
  unknown.Return({{kTracedCall, 0, 0}});
  EXPECT_EQ(BuildError(unknown).code(), Code::kInvalidArgument);
  EXPECT_EQ(BuildError(unknown).message(), "Return of a value that is not part of this program");

  ProgramBuilder routed;
  auto outs = routed.Call(gate_, {routed.Arg(DType::kF32, {4, 2}), routed.Arg(DType::kI32, {4})});
  routed.Return({routed.Route(outs[0], outs[1])});
  EXPECT_EQ(BuildError(routed).message(), "a routed value can only feed a call, not be returned");
}

TEST_F(ProgramBuilderTest, ARouteIsRowsOfDynamicLengthCutAlongDimensionZero) {
  ProgramBuilder p;
  auto outs = p.Call(gate_, {p.Arg(DType::kF32, {4, 2}), p.Arg(DType::kI32, {4})});
  Traced routed = p.Route(outs[0], outs[1]);
  EXPECT_TRUE(SameValue(routed, {kTracedRoute, 0, 0}));
  const Function expert = test::Registered(
      15, test::PassThrough("expert", {ir::TensorType{DType::kF32, {kDynamicDim, 2}, {0, -1}}}),
      slice_);
  p.Return({p.Call(expert, {routed})[0]});
  auto program = p.Build();
  ASSERT_THAT(program, IsOk());
  const Program::Impl* impl = HandleAccess::ImplOf(*program);
  ASSERT_EQ(impl->routes.size(), 1u);
  EXPECT_TRUE(SameValue(impl->routes[0].values, outs[0]));
  EXPECT_TRUE(SameValue(impl->routes[0].destinations, outs[1]));
  EXPECT_EQ(impl->routes[0].type, (ir::TensorType{DType::kF32, {kDynamicDim, 2}, {0, -1}}));
  EXPECT_TRUE(SameValue(impl->calls[1].args.at(0), routed));
}

TEST_F(ProgramBuilderTest, BadRoutesAreRefused) {
  {
    ProgramBuilder p;
    Traced rows = p.Arg(DType::kF32, {4, 2});
    auto outs = p.Call(gate_, {rows, p.Arg(DType::kI32, {4})});
    EXPECT_EQ(p.Route(rows, outs[1]).kind, -1);
    EXPECT_EQ(BuildError(p).message(),
              "Route takes two outputs of one call: the rows and their destinations");
  }
  {
    ProgramBuilder p;
    auto first = p.Call(gate_, {p.Arg(DType::kF32, {4, 2}), p.Arg(DType::kI32, {4})});
    auto second = p.Call(gate_, {p.Arg(DType::kF32, {4, 2}), p.Arg(DType::kI32, {4})});
    p.Route(first[0], second[1]);
    EXPECT_THAT(BuildError(p).message(), HasSubstr("two outputs of one call"));
  }
  {
    ProgramBuilder p;
    auto outs = p.Call(gate_, {p.Arg(DType::kF32, {4, 2}), p.Arg(DType::kI32, {4})});
    p.Route(outs[1], outs[0]);  // destinations f32[4,2]
    Status error = BuildError(p);
    EXPECT_EQ(error.code(), Code::kInvalidArgument);
    EXPECT_EQ(error.message(),
              "Route: i32[4] rows need i32[4] destinations laid out like them, got f32[4,2]");
  }
}

}  // namespace
}  // namespace atl
