#include "bench/common/bench_args.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace atl::bench {
namespace {

std::optional<int> ParseArgs(CLI::App& app, std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return Parse(app, static_cast<int>(argv.size()), argv.data());
}

TEST(BenchArgsTest, DefaultsToTheFullSizeAndTheSourceTreesResults) {
  CLI::App app{"test"};
  BenchOptions options;
  AddBenchOptions(app, options);
  EXPECT_EQ(ParseArgs(app, {"bench"}), std::nullopt);
  EXPECT_FALSE(options.quick);
  EXPECT_EQ(options.out_dir, std::string(ATOLL_SOURCE_DIR) + "/bench/results");
}

TEST(BenchArgsTest, QuickAndOut) {
  CLI::App app{"test"};
  BenchOptions options;
  AddBenchOptions(app, options);
  int hosts = 0;
  app.add_option("--hosts", hosts);
  EXPECT_EQ(ParseArgs(app, {"bench", "--quick", "--out", "/tmp/x", "--hosts", "4"}), std::nullopt);
  EXPECT_TRUE(options.quick);
  EXPECT_EQ(options.out_dir, "/tmp/x");
  EXPECT_EQ(hosts, 4);
}

TEST(BenchArgsTest, ErrorsAndHelpGiveAnExitStatus) {
  {
    CLI::App app{"test"};
    BenchOptions options;
    AddBenchOptions(app, options);
    EXPECT_EQ(ParseArgs(app, {"bench", "--no-such-option"}), 1);
  }
  {
    CLI::App app{"test"};
    BenchOptions options;
    AddBenchOptions(app, options);
    EXPECT_EQ(ParseArgs(app, {"bench", "--help"}), 0);
  }
}

}  // namespace
}  // namespace atl::bench
