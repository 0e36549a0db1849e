// Parsing of job files (job/job.h): the example parses, and each kind of mistake is an
// InvalidArgument that says what is wrong.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "job/job.h"

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
  ASSERT_TRUE(job.ok()) << job.status().ToString();
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
               "dtype = \"f64\", shape = [2] }]\nops = [{ op = \"mul\"", "unknown dtype 'f64'"},
        BadJob{"[program]", "[programme]", "no [program]"},
        BadJob{"name = \"B\"", "name = \"A\"", "slice 'A' is defined twice"},
        BadJob{"v = [1, 2]", "v = [1, \"two\"]", "job.toml"}));

TEST(JobTest, ShardingsParse) {
  auto job =
      ParseJob(Replace(Example(), "inputs = [{ dtype = \"f32\", shape = [2] }]",
                       "inputs = [{ dtype = \"f32\", shape = [2], sharding = \"replicated\" }]"),
               "job.toml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_TRUE(job->functions[0].inputs[0].sharding.axes.empty());
  auto bad =
      ParseJob(Replace(Example(), "inputs = [{ dtype = \"f32\", shape = [2] }]",
                       "inputs = [{ dtype = \"f32\", shape = [2], sharding = \"split:x\" }]"),
               "job.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("split:x"), std::string::npos) << bad.status().ToString();
}

}  // namespace
}  // namespace atl
