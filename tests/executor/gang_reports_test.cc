// GangReports: one report per gang per executor, ready when its last local shard finished.
#include "services/executor/gang_reports.h"

#include <gtest/gtest.h>

namespace atl::executor {
namespace {

TEST(GangReportsTest, AGangIsReportedOnceWhenItsLastLocalShardFinished) {
  GangReports reports;
  for (int shard = 0; shard < 4; ++shard) reports.Expect("s", 7);
  for (uint64_t busy : {10, 40, 20}) {
    reports.ShardDone("s", 7, busy, Code::kOk);
    EXPECT_TRUE(reports.TakeReady().empty()) << "reported before the last shard";
  }
  reports.ShardDone("s", 7, 30, Code::kOk);
  auto ready = reports.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  ASSERT_EQ(ready.at("s").gangs.size(), 1u);
  const proto::GangDone& done = ready.at("s").gangs[0];
  EXPECT_EQ(done.gang_seq, 7u);
  EXPECT_EQ(done.shards, 4u);
  EXPECT_EQ(done.busy_us, 40u);  // the longest shard
  EXPECT_EQ(done.error_code, 0);
  EXPECT_EQ(reports.pending(), 0u);
  EXPECT_TRUE(reports.TakeReady().empty());
}

TEST(GangReportsTest, GangsReadyInOneTurnShareAMessagePerScheduler) {
  GangReports reports;
  reports.Expect("s", 1);
  reports.Expect("s", 2);
  reports.Expect("t", 1);
  reports.ShardDone("s", 1, 5, Code::kOk);
  reports.ShardDone("s", 2, 5, Code::kOk);
  reports.ShardDone("t", 1, 5, Code::kOk);
  auto ready = reports.TakeReady();
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(ready.at("s").gangs.size(), 2u);
  EXPECT_EQ(ready.at("t").gangs.size(), 1u);
}

TEST(GangReportsTest, AFailedShardMarksItsGangsReport) {
  GangReports reports;
  reports.Expect("s", 3);
  reports.Expect("s", 3);
  reports.ShardDone("s", 3, 5, Code::kNotFound);
  reports.ShardDone("s", 3, 5, Code::kOk);
  auto ready = reports.TakeReady();
  ASSERT_EQ(ready.at("s").gangs.size(), 1u);
  EXPECT_EQ(ready.at("s").gangs[0].error_code, static_cast<int32_t>(Code::kNotFound));
}

TEST(GangReportsTest, AShardNeverExpectedIsReportedOnItsOwn) {
  GangReports reports;
  reports.ShardDone("s", 9, 5, Code::kOk);
  auto ready = reports.TakeReady();
  ASSERT_EQ(ready.at("s").gangs.size(), 1u);
  EXPECT_EQ(ready.at("s").gangs[0].shards, 1u);
  EXPECT_EQ(reports.pending(), 0u);
}

}  // namespace
}  // namespace atl::executor
