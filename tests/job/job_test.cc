// Parsing of job files (job/job.h): the example parses, and each kind of mistake is an
// InvalidArgument that says what is wrong; and building a job's functions (BuildJobFunction):
// every op of the format, every unary op of the table by its name.
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "job/job.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

std::string Example() {
  std::ifstream in(ATOLL_SOURCE_DIR "/examples/figure2.toml");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(JobTest, TheFigure2ExampleParses) {
  auto job = ParseJob(Example(), "figure2.toml");
  ASSERT_THAT(job, IsOk());
  EXPECT_EQ(job->name, "figure2");
  EXPECT_EQ(job->slices.size(), 3u);
  ASSERT_EQ(job->functions.size(), 3u);
  EXPECT_EQ(job->functions[0].ops[0].op, "mul");
  EXPECT_EQ(job->functions[0].ops[0].args, (std::vector<std::string>{"in0", "2"}));
  EXPECT_EQ(job->calls.size(), 4u);
  EXPECT_EQ(job->returns, (std::vector<std::string>{"y", "z"}));
  ASSERT_EQ(job->inputs.size(), 1u);
  EXPECT_EQ(job->inputs[0], Tensor::F32({2}, {1, 2}));
}

struct BadJob {
  std::string from, to, message;
};

class BadJobTest : public ::testing::TestWithParam<BadJob> {};

TEST_P(BadJobTest, IsRefusedWithAClearError) {
  const BadJob& bad = GetParam();
  auto job = ParseJob(Replace(Example(), bad.from, bad.to), "job.toml");
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), Code::kInvalidArgument);
  EXPECT_NE(job.status().message().find(bad.message), std::string::npos) << job.status().ToString();
}

INSTANTIATE_TEST_SUITE_P(
    Mistakes, BadJobTest,
    ::testing::Values(
        BadJob{"slice = \"B\"", "slice = \"Q\"", "unknown slice 'Q'"},
        BadJob{"{ fn = \"b\",", "{ fn = \"nope\",", "unknown function 'nope'"},
        BadJob{"{ fn = \"c\", args = [\"x\"]", "{ fn = \"c\", args = [\"w\"]",
               "uses 'w' before it is defined"},
        BadJob{"returns = [\"y\", \"z\"]", "returns = [\"y\", \"q\"]", "unknown value 'q'"},
        BadJob{"v = [1, 2]", "v = [1, 2, 3]", "3 values for shape [2]"},
        BadJob{"v = [1, 2]", "w = [1, 2]", "no value for argument 'v'"},
        BadJob{"dtype = \"f32\", shape = [2] }]\nops = [{ op = \"mul\"",
               "dtype = \"f128\", shape = [2] }]\nops = [{ op = \"mul\"",
               "unknown dtype 'f128' (known: f32, i32, bf16, f16, f64, i64, bool, i8, u8, u32)"},
        BadJob{"[program]", "[programme]", "no [program]"},
        BadJob{"name = \"B\"", "name = \"A\"", "slice 'A' is defined twice"},
        BadJob{"v = [1, 2]", "v = [1, \"two\"]", "job.toml"},
        // Found by fuzzing: toml11 3.7 reads past its buffer on some invalid UTF-8.
        BadJob{"The Pathways", "The Pat\xffways", "not UTF-8 at byte"}));

// Numbers out of range: each refused naming its field, the value and what is allowed, never
// wrapped into an unsigned count or cast into a dtype that cannot hold it.
INSTANTIATE_TEST_SUITE_P(
    OutOfRange, BadJobTest,
    ::testing::Values(
        BadJob{"name = \"figure2\"", "name = \"figure2\"\nsteps = -3",
               "steps must be in 1..4294967296, not -3"},
        BadJob{"name = \"figure2\"", "name = \"figure2\"\nsteps = 0",
               "steps must be in 1..4294967296, not 0"},
        BadJob{"name = \"A\"\ndevices = 2", "name = \"A\"\ndevices = -1",
               "slice 'A' devices must be in 1..65536, not -1"},
        BadJob{"name = \"A\"\ndevices = 2", "name = \"A\"\ndevices = 0",
               "slice 'A' devices must be in 1..65536, not 0"},
        BadJob{"name = \"A\"\ndevices = 2", "name = \"A\"\ndevices = 4294967298",
               "slice 'A' devices must be in 1..65536, not 4294967298"},
        BadJob{"inputs = [{ dtype = \"f32\", shape = [2] }]",
               "inputs = [{ dtype = \"f32\", shape = [2, -3] }]",
               "function 'a' input 0: shape [2,-3] has dimension -3: every one must be at least 1"},
        BadJob{"inputs = [{ dtype = \"f32\", shape = [2] }]",
               "inputs = [{ dtype = \"f32\", shape = [0] }]",
               "function 'a' input 0: shape [0] has dimension 0"},
        BadJob{"inputs = [{ dtype = \"f32\", shape = [2] }]",
               "inputs = [{ dtype = \"f32\", shape = [4294967296, 1073741824] }]",
               "function 'a' input 0: f32[4294967296,1073741824] takes more bytes than an int64 "
               "can count"},
        BadJob{"inputs = [{ dtype = \"f32\", shape = [2] }]",
               "inputs = [{ dtype = \"f32\", shape = [2], sharding = \"split:1\" }]",
               "function 'a' input 0: sharding 'split:1' must split a dimension in 0..0"},
        BadJob{"inputs = [{ dtype = \"f32\", shape = [2] }]",
               "inputs = [{ dtype = \"f32\", shape = [2], sharding = \"split:2147483647\" }]",
               "must split a dimension in 0..0"},
        BadJob{"dtype = \"f32\", shape = [2] }]\ncalls",
               "dtype = \"f32\", shape = [4294967296, 4294967296] }]\ncalls",
               "argument 'v': shape [4294967296,4294967296] has more elements than an int64 can "
               "count"},
        BadJob{"v = [1, 2]", "v = [1, 1e40]", "input 'v': value 1 (1e+40) is not a finite f32"},
        BadJob{"v = [1, 2]", "v = [nan, 2]", "input 'v': value 0 (nan) is not a finite f32"}));

TEST(JobTest, I32InputsMustBeWholeNumbersInRange) {
  const std::string i32 = Replace(Example(), "dtype = \"f32\", shape = [2] }]\ncalls",
                                  "dtype = \"i32\", shape = [2] }]\ncalls");
  auto good = ParseJob(Replace(i32, "v = [1, 2]", "v = [-2147483648, 2147483647]"), "job.toml");
  ASSERT_THAT(good, IsOk());
  EXPECT_EQ(good->inputs[0], Tensor::I32({2}, {-2147483648, 2147483647}));
  for (const char* bad : {"v = [1, 2.5]", "v = [1, 2147483648]", "v = [-2147483649, 0]"}) {
    auto job = ParseJob(Replace(i32, "v = [1, 2]", bad), "job.toml");
    ASSERT_FALSE(job.ok()) << bad;
    EXPECT_EQ(job.status().code(), Code::kInvalidArgument);
    EXPECT_NE(job.status().message().find("is not a whole number in i32's range"),
              std::string::npos)
        << job.status().ToString();
  }
}

// The new dtypes by name: the program's argument of each one, its values rounded into it once
// or refused when it cannot hold them, and a cast op between them.
TEST(JobTest, EveryDTypeIsTakenByNameWithValuesItHolds) {
  auto typed = [](const std::string& dtype, const std::string& values) {
    return ParseJob(Replace(Replace(Example(), "dtype = \"f32\", shape = [2] }]\ncalls",
                                    "dtype = \"" + dtype + "\", shape = [2] }]\ncalls"),
                            "v = [1, 2]", "v = " + values),
                    "job.toml");
  };
  auto bf16 = typed("bf16", "[0.1, 300]");
  ASSERT_THAT(bf16, IsOk());
  EXPECT_EQ(bf16->args[0].dtype, DType::kBF16);
  EXPECT_EQ(bf16->inputs[0].ToDoubles(), (std::vector<double>{0.10009765625, 300}));
  auto f64 = typed("f64", "[0.1, 1e300]");
  ASSERT_THAT(f64, IsOk());
  EXPECT_EQ(f64->inputs[0], Tensor::F64({2}, {0.1, 1e300}));
  auto i64 = typed("i64", "[-1099511627776, 9007199254740992]");
  ASSERT_THAT(i64, IsOk());
  EXPECT_EQ(i64->inputs[0], Tensor::I64({2}, {-(int64_t{1} << 40), int64_t{1} << 53}));
  for (const auto& [dtype, values, says] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"f16", "[1, 65520]", "value 1 (65520) is not a finite f16"},
           {"bf16", "[1, 1e39]", "value 1 (1e+39) is not a finite bf16"},
           {"i64", "[1, 9007199254740993]", "value 1 (9007199254740993) is beyond 2^53"},
           {"i64", "[1.5, 2]", "value 0 (1.5) is not a whole number in i64's range"}}) {
    auto job = typed(dtype, values);
    ASSERT_FALSE(job.ok()) << dtype << " " << values;
    EXPECT_NE(job.status().message().find(says), std::string::npos) << job.status().ToString();
  }
}

TEST(JobFunctionTest, CastTakesAValueAndADTypeName) {
  auto built = BuildJobFunction(
      {"f", "A", {{DType::kF32, {4}, Sharding::Split(0)}}, {{"cast", {"in0", "bf16"}}}, {}});
  ASSERT_THAT(built, IsOk());
  for (const auto& [args, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"in0", "bf17"}, "unknown dtype 'bf17'"},
           {{"in0"}, "op 'cast' takes 2 args (a value and a dtype), got 1"},
           {{"2", "f64"}, "the first argument must be a value"}}) {
    auto bad = BuildJobFunction(
        {"f", "A", {{DType::kF32, {4}, Sharding::Split(0)}}, {{"cast", args}}, {}});
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find(says), std::string::npos) << bad.status().ToString();
  }
}

TEST(JobTest, ShardingsParse) {
  auto job =
      ParseJob(Replace(Example(), "inputs = [{ dtype = \"f32\", shape = [2] }]",
                       "inputs = [{ dtype = \"f32\", shape = [2], sharding = \"replicated\" }]"),
               "job.toml");
  ASSERT_THAT(job, IsOk());
  EXPECT_TRUE(job->functions[0].inputs[0].sharding.axes.empty());
  auto bad =
      ParseJob(Replace(Example(), "inputs = [{ dtype = \"f32\", shape = [2] }]",
                       "inputs = [{ dtype = \"f32\", shape = [2], sharding = \"split:x\" }]"),
               "job.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("split:x"), std::string::npos) << bad.status().ToString();
}

// f(in0) = op(in0 ...) over one input of `dtype` [4], split.
JobSpec::FunctionSpec OneOpFunction(std::string op, std::vector<std::string> args,
                                    DType dtype = DType::kF32) {
  JobSpec::FunctionSpec spec;
  spec.name = "f";
  spec.slice = "A";
  spec.inputs = {{dtype, {4}, Sharding::Split(0)}};
  spec.ops = {{std::move(op), std::move(args)}};
  return spec;
}

// The names of the rows of atoll/unary_ops.def.
const std::vector<std::string>& UnaryOpNames() {
  static const std::vector<std::string> names = {
#define ATOLL_UNARY_OP(Name, name) name,
#include "atoll/unary_ops.def"
  };
  return names;
}

TEST(JobFunctionTest, EveryUnaryOpOfTheTableIsAcceptedByItsName) {
  ASSERT_FALSE(UnaryOpNames().empty());
  for (const std::string& name : UnaryOpNames()) {
    SCOPED_TRACE(name);
    auto built = BuildJobFunction(OneOpFunction(name, {"in0"}));
    EXPECT_THAT(built, IsOk());
    // The op the name made is the one of that name: its type rule names it.
    auto ints = BuildJobFunction(OneOpFunction(name, {"in0"}, DType::kI32));
    ASSERT_FALSE(ints.ok());
    EXPECT_NE(ints.status().message().find(name + " takes f32, bf16, f16 or f64"),
              std::string::npos)
        << ints.status().ToString();
    auto two_args = BuildJobFunction(OneOpFunction(name, {"in0", "in0"}));
    ASSERT_FALSE(two_args.ok());
    EXPECT_NE(two_args.status().message().find("takes 1 arg, got 2"), std::string::npos)
        << two_args.status().ToString();
    EXPECT_FALSE(BuildJobFunction(OneOpFunction(name, {"2"})).ok());
  }
}

TEST(JobFunctionTest, ArithmeticMatmulAndSpinKeepTheirArguments) {
  for (const char* op : {"add", "sub", "mul", "div"}) {
    EXPECT_THAT(BuildJobFunction(OneOpFunction(op, {"in0", "in0"})), IsOk()) << op;
    EXPECT_THAT(BuildJobFunction(OneOpFunction(op, {"in0", "2"})), IsOk()) << op;
    EXPECT_FALSE(BuildJobFunction(OneOpFunction(op, {"in0"})).ok()) << op;
  }
  EXPECT_THAT(BuildJobFunction(OneOpFunction("spin", {"in0", "10"})), IsOk());
  EXPECT_FALSE(BuildJobFunction(OneOpFunction("spin", {"in0", "in0"})).ok());
  EXPECT_FALSE(BuildJobFunction(OneOpFunction("matmul", {"in0", "2"})).ok());
  auto unknown = BuildJobFunction(OneOpFunction("cube", {"in0", "in0"}));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), Code::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("function 'f' op 0"), std::string::npos)
      << unknown.status().ToString();
  EXPECT_NE(unknown.status().message().find("unknown op 'cube'"), std::string::npos)
      << unknown.status().ToString();
}

TEST(JobTest, MeshSlicesAndAxesShardingsParse) {
  auto job = ParseJob(
      Replace(Replace(Example(), "name = \"A\"\ndevices = 2", "name = \"A\"\nmesh = [2, 3]"),
              "inputs = [{ dtype = \"f32\", shape = [2] }]",
              "inputs = [{ dtype = \"f32\", shape = [2], sharding = \"axes:1\" }]"),
      "job.toml");
  ASSERT_THAT(job, IsOk());
  EXPECT_EQ(job->slices[0].mesh, (Shape{2, 3}));
  EXPECT_EQ(job->slices[0].devices, 6u);
  EXPECT_EQ(job->functions[0].inputs[0].sharding.axes, (std::vector<int>{1}));
  for (const char* bad : {"axes:", "axes:1,", "axes:x", "axes:-2", "axes:0,1"}) {
    auto refused = ParseJob(
        Replace(
            Example(), "inputs = [{ dtype = \"f32\", shape = [2] }]",
            fmt::format("inputs = [{{ dtype = \"f32\", shape = [2], sharding = \"{}\" }}]", bad)),
        "job.toml");
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find(bad), std::string::npos)
        << refused.status().ToString();
  }
  auto empty_axis = ParseJob(
      Replace(Example(), "name = \"A\"\ndevices = 2", "name = \"A\"\nmesh = [2, 0]"), "job.toml");
  ASSERT_FALSE(empty_axis.ok());
  EXPECT_NE(empty_axis.status().message().find("every axis must be at least 1"), std::string::npos)
      << empty_axis.status().ToString();
}

TEST(JobTest, ASliceMayNameItsDevicesKind) {
  auto job = ParseJob(
      Replace(Example(), "name = \"A\"\ndevices = 2", "name = \"A\"\ndevices = 2\nkind = \"sim\""),
      "job.toml");
  ASSERT_THAT(job, IsOk());
  EXPECT_EQ(job->slices[0].kind, "sim");
  EXPECT_EQ(job->slices[1].kind, "");  // any kind
}

TEST(JobFunctionTest, TheCollectivesTakeAValueAndWholeNumbers) {
  // in0: f32 [4, 4] cut along mesh axis 0; in1: the same, replicated.
  auto function = [](std::string op, std::vector<std::string> args) {
    JobSpec::FunctionSpec spec;
    spec.name = "f";
    spec.slice = "A";
    spec.inputs = {{DType::kF32, {4, 4}, Sharding::Split(0)},
                   {DType::kF32, {4, 4}, Sharding::Replicated()}};
    spec.ops = {{std::move(op), std::move(args)}};
    return BuildJobFunction(spec);
  };
  const std::vector<std::pair<std::string, std::vector<std::string>>> accepted = {
      {"all_reduce_sum", {"in1"}},
      {"all_reduce_sum", {"in1", "0"}},
      {"all_reduce_max", {"in1", "0"}},
      {"all_reduce_min", {"in1"}},
      {"all_reduce_mean", {"in1", "0"}},
      {"all_gather", {"in0", "0"}},
      {"reduce_scatter", {"in1", "0", "1"}},
      {"all_to_all", {"in0", "0", "1"}},
      {"broadcast", {"in1", "0", "1"}},
      {"collective_permute", {"in0", "0", "0", "1", "1", "0"}},
  };
  for (const auto& [op, args] : accepted) {
    auto built = function(op, args);
    EXPECT_THAT(built, IsOk()) << op << ": " << built.status().ToString();
  }
  const std::vector<std::tuple<std::string, std::vector<std::string>, std::string>> refused = {
      {"all_gather", {"in0"}, "takes a value and 1 whole numbers"},
      {"reduce_scatter", {"in1", "0"}, "takes a value and 2 whole numbers"},
      {"all_reduce_sum", {"in1", "0", "1"}, "an optional mesh axis"},
      {"collective_permute", {"in0", "0", "1"}, "(source, target) pairs"},
      {"broadcast", {"in1", "0", "0.5"}, "argument 2 ('0.5') must be a whole number"},
      {"all_gather", {"2", "0"}, "the first argument must be a value"},
      {"all_gather", {"in1", "0"}, "needs a tensor cut along it"},  // the type rule's
  };
  for (const auto& [op, args, mentions] : refused) {
    auto built = function(op, args);
    ASSERT_FALSE(built.ok()) << op;
    EXPECT_EQ(built.status().code(), Code::kInvalidArgument) << op;
    EXPECT_NE(built.status().message().find(mentions), std::string::npos)
        << op << ": " << built.status().ToString();
  }
}

}  // namespace
}  // namespace atl
