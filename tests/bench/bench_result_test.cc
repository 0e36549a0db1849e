#include "bench/common/bench_result.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include "tests/status_matchers.h"

namespace atl::bench {
namespace {

TEST(SummarizeTest, OddCountTakesTheMiddleSample) {
  auto s = Summarize({5, 1, 3});
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->runs, 3u);
  EXPECT_EQ(s->min, 1);
  EXPECT_EQ(s->median, 3);
  EXPECT_EQ(s->max, 5);
}

TEST(SummarizeTest, EvenCountAveragesTheTwoMiddleSamples) {
  auto s = Summarize({4, 1, 10, 2});
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->runs, 4u);
  EXPECT_EQ(s->min, 1);
  EXPECT_DOUBLE_EQ(s->median, 3);
  EXPECT_EQ(s->max, 10);
}

TEST(SummarizeTest, OneSample) {
  auto s = Summarize({7.5});
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->median, 7.5);
  EXPECT_EQ(s->min, 7.5);
  EXPECT_EQ(s->max, 7.5);
}

TEST(SummarizeTest, RefusesNoSamplesAndNonFiniteOnes) {
  EXPECT_EQ(Summarize({}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Summarize({1, std::nan("")}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Summarize({1, HUGE_VAL}).status().code(), Code::kInvalidArgument);
}

class BenchResultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/atoll-bench-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  nlohmann::json ReadBack(const std::string& name) const {
    std::ifstream in(dir_ + "/" + name + ".json");
    EXPECT_TRUE(in.good()) << "no " << name << ".json in " << dir_;
    return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  }

  std::string dir_;
};

TEST_F(BenchResultTest, WrittenFileHasEveryField) {
  BenchResult r("dispatch", /*quick=*/true);
  r.Add("chained", {{"hosts", 4}, {"compute_us", 0}}, "computations_per_s", "1/s",
        {30, 10, 20, 40});
  r.Add("fused", {{"hosts", size_t{8}}, {"policy", "fifo"}, {"ratio", 0.5}}, "latency_ms", "ms",
        {1.5});
  r.Derive("breakeven_compute_ms_hosts_8", 0.7);
  Status written = r.Write(dir_ + "/results");  // a directory that does not exist yet
  ASSERT_THAT(written, IsOk());

  std::ifstream in(dir_ + "/results/dispatch.json");
  ASSERT_TRUE(in.good());
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["bench"], "dispatch");
  ASSERT_TRUE(j["commit"].is_string());
  EXPECT_FALSE(j["commit"].get<std::string>().empty());
  ASSERT_TRUE(j["machine"].is_object());
  EXPECT_TRUE(j["machine"]["cores"].is_number_integer());
  EXPECT_TRUE(j["machine"]["cpu"].is_string());
  ASSERT_TRUE(j["machine"]["date"].is_string());
  EXPECT_EQ(j["machine"]["date"].get<std::string>().size(), 10u);  // YYYY-MM-DD
  EXPECT_EQ(j["quick"], true);
  ASSERT_TRUE(j["rows"].is_array());
  ASSERT_EQ(j["rows"].size(), 2u);
  const auto& row = j["rows"][0];
  EXPECT_EQ(row["series"], "chained");
  EXPECT_EQ(row["params"], nlohmann::json({{"hosts", 4}, {"compute_us", 0}}));
  EXPECT_EQ(row["metric"], "computations_per_s");
  EXPECT_EQ(row["unit"], "1/s");
  EXPECT_EQ(row["runs"], 4);
  EXPECT_EQ(row["min"], 10.0);
  EXPECT_EQ(row["median"], 25.0);
  EXPECT_EQ(row["max"], 40.0);
  const auto& row2 = j["rows"][1];
  EXPECT_EQ(row2["params"]["hosts"], 8);
  EXPECT_EQ(row2["params"]["policy"], "fifo");
  EXPECT_EQ(row2["params"]["ratio"], 0.5);
  EXPECT_EQ(row2["runs"], 1);
  ASSERT_TRUE(j["derived"].is_object());
  EXPECT_EQ(j["derived"]["breakeven_compute_ms_hosts_8"], 0.7);
  // Nothing but the documented keys, and no temporary file left behind.
  EXPECT_EQ(j.size(), 6u);
  EXPECT_EQ(row.size(), 8u);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_ + "/results"),
                          std::filesystem::directory_iterator()),
            1);
}

TEST_F(BenchResultTest, KeysKeepTheDocumentedOrder) {
  BenchResult r("order", false);
  r.Add("s", {{"b", 1}, {"a", 2}}, "m", "u", {1});
  const std::string text = r.ToJson().dump();
  EXPECT_LT(text.find("\"bench\""), text.find("\"commit\""));
  EXPECT_LT(text.find("\"commit\""), text.find("\"machine\""));
  EXPECT_LT(text.find("\"quick\""), text.find("\"rows\""));
  EXPECT_LT(text.find("\"rows\""), text.find("\"derived\""));
  EXPECT_LT(text.find("\"b\""), text.find("\"a\""));  // params in the order given
}

TEST_F(BenchResultTest, EmptyResultStillHasRowsAndDerived) {
  BenchResult r("empty", false);
  ASSERT_THAT(r.Write(dir_), IsOk());
  const auto j = ReadBack("empty");
  EXPECT_EQ(j["quick"], false);
  EXPECT_TRUE(j["rows"].is_array() && j["rows"].empty());
  EXPECT_TRUE(j["derived"].is_object() && j["derived"].empty());
}

TEST_F(BenchResultTest, CommitComesFromTheEnvironmentFirst) {
  setenv("ATOLL_COMMIT", "feedbee", 1);
  BenchResult r("commit", false);
  unsetenv("ATOLL_COMMIT");
  EXPECT_EQ(r.ToJson()["commit"], "feedbee");
  EXPECT_FALSE(CurrentCommit().empty());  // git's short hash here, or "unknown"
}

TEST_F(BenchResultTest, BadRowsFailTheWriteAndWriteNothing) {
  BenchResult no_samples("bad", false);
  no_samples.Add("s", {}, "m", "u", {});
  Status s = no_samples.Write(dir_);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("row s m"), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/bad.json"));

  BenchResult repeated("bad", false);
  repeated.Add("s", {{"hosts", 1}, {"hosts", 2}}, "m", "u", {1});
  EXPECT_EQ(repeated.Write(dir_).code(), Code::kInvalidArgument);

  BenchResult nan_derived("bad", false);
  nan_derived.Derive("ratio", std::nan(""));
  EXPECT_EQ(nan_derived.Write(dir_).code(), Code::kInvalidArgument);
}

TEST_F(BenchResultTest, DeriveReplacesAnEarlierValue) {
  BenchResult r("derive", false);
  r.Derive("x", 1);
  r.Derive("y", 2);
  r.Derive("x", 3);
  const auto j = r.ToJson();
  EXPECT_EQ(j["derived"].size(), 2u);
  EXPECT_EQ(j["derived"]["x"], 3.0);
}

TEST_F(BenchResultTest, UnwritableDirectoryIsAnError) {
  BenchResult r("x", false);
  std::ofstream(dir_ + "/file") << "not a directory";
  Status s = r.Write(dir_ + "/file/sub");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir_), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace atl::bench
