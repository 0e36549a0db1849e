// GangReports: one report per gang per executor, ready when its last local shard finished.
#include "services/executor/gang_reports.h"

#include <gtest/gtest.h>

namespace atl::executor {
namespace {

TEST(GangReportsTest, AGangIsReportedOnceWhenItsLastLocalShardFinished) {
  GangReports reports;
  for (int shard = 0; shard < 4; ++shard) reports.Expect("s", 7);
  for (uint64_t busy : {10, 40, 20}) {
    reports.ShardDone("s", 7, busy, Status::Ok());
    EXPECT_TRUE(reports.TakeReady().empty()) << "reported before the last shard";
  }
  reports.ShardDone("s", 7, 30, Status::Ok());
  auto ready = reports.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].first, "s");
  const proto::GangDone& done = ready[0].second;
  EXPECT_EQ(done.gang_seq, 7u);
  EXPECT_EQ(done.shards, 4u);
  EXPECT_EQ(done.busy_us, 40u);  // the longest shard
  EXPECT_EQ(done.error_code, 0);
  EXPECT_EQ(reports.pending(), 0u);
  EXPECT_TRUE(reports.TakeReady().empty());
}

TEST(GangReportsTest, GangsReadyInOneTurnAreReportedEachOnItsOwnInOrder) {
  GangReports reports;
  reports.Expect("s", 1);
  reports.Expect("s", 2);
  reports.Expect("t", 1);
  reports.ShardDone("s", 2, 5, Status::Ok());
  reports.ShardDone("t", 1, 5, Status::Ok());
  reports.ShardDone("s", 1, 5, Status::Ok());
  auto ready = reports.TakeReady();
  ASSERT_EQ(ready.size(), 3u);
  EXPECT_EQ(ready[0].first, "s");
  EXPECT_EQ(ready[0].second.gang_seq, 2u);
  EXPECT_EQ(ready[1].first, "t");
  EXPECT_EQ(ready[1].second.gang_seq, 1u);
  EXPECT_EQ(ready[2].first, "s");
  EXPECT_EQ(ready[2].second.gang_seq, 1u);
}

TEST(GangReportsTest, AFailedShardMarksItsGangsReportWithTheFirstError) {
  GangReports reports;
  for (int shard = 0; shard < 3; ++shard) reports.Expect("s", 3);
  reports.ShardDone("s", 3, 5, NotFound("function 4 was never compiled"));
  reports.ShardDone("s", 3, 5, Status::Ok());
  reports.ShardDone("s", 3, 5, Unavailable("a later failure"));
  auto ready = reports.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].second.error_code, static_cast<int32_t>(Code::kNotFound));
  EXPECT_EQ(ready[0].second.error, "function 4 was never compiled");
}

TEST(GangReportsTest, AShardNeverExpectedIsReportedOnItsOwn) {
  GangReports reports;
  reports.ShardDone("s", 9, 5, Status::Ok());
  auto ready = reports.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].second.shards, 1u);
  EXPECT_EQ(reports.pending(), 0u);
}

}  // namespace
}  // namespace atl::executor
