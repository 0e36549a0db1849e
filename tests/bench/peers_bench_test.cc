// atoll-bench-peers --quick, run as a user would, into a temporary directory: it must
// measure both systems on every workload. Skipped where Python has no Dask distributed.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/launcher/subprocess.h"

namespace atl::bench {
namespace {

using atl::testing::RunCommand;

class PeersBenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (RunCommand({ATOLL_PYTHON, "-c", "import distributed"}).exit_code != 0) {
      GTEST_SKIP() << ATOLL_PYTHON
                   << " cannot import distributed (scripts/setup.sh installs it into .venv)";
    }
    char pattern[] = "/tmp/atoll-peers-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string dir_;
};

TEST_F(PeersBenchTest, QuickRunMeasuresBothSystemsOnEveryWorkload) {
  const auto run =
      RunCommand({std::string(ATOLL_BIN_DIR) + "/atoll-bench-peers", "--quick", "--out", dir_},
                 std::chrono::seconds(150));
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  std::ifstream in(dir_ + "/peers.json");
  ASSERT_TRUE(in.good()) << "no peers.json in " << dir_;
  const auto result = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(result.is_object());
  EXPECT_EQ(result["bench"], "peers");
  EXPECT_EQ(result["quick"], true);
  std::set<std::pair<std::string, std::string>> measured;  // (series, workload)
  for (const auto& row : result["rows"]) {
    EXPECT_EQ(row["metric"], "tasks_per_s");
    EXPECT_GT(row["median"].get<double>(), 0) << row.dump();
    measured.emplace(row["series"], row["params"]["workload"]);
  }
  const std::set<std::pair<std::string, std::string>> expected = {
      {"atoll", "independent"}, {"atoll", "chain"}, {"atoll", "op_by_op"},
      {"dask", "independent"},  {"dask", "chain"},  {"dask", "op_by_op"}};
  EXPECT_EQ(measured, expected);
  for (const char* workload : {"independent", "chain", "op_by_op"}) {
    const std::string name = std::string("atoll_over_dask_") + workload;
    ASSERT_TRUE(result["derived"].contains(name)) << result["derived"].dump();
    EXPECT_GT(result["derived"][name].get<double>(), 0);
  }
}

}  // namespace
}  // namespace atl::bench
