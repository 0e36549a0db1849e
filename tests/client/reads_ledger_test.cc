// ReadsLedger: a run keeps the runs it reads until each of its schedulers is done with it,
// and no longer.
#include "client/reads_ledger.h"

#include <gtest/gtest.h>

namespace atl {
namespace {

using KeepAlive = ReadsLedger::KeepAlive;

TEST(ReadsLedgerTest, ReadsAreHeldUntilEverySchedulerSaidDone) {
  ReadsLedger ledger;
  auto earlier = std::make_shared<int>(1);
  std::weak_ptr<int> watch = earlier;
  ledger.Hold(9, {"s0", "s1"}, {std::move(earlier)});
  EXPECT_TRUE(ledger.Awaits("s0"));
  EXPECT_TRUE(ledger.Awaits("s1"));
  EXPECT_TRUE(ledger.Done("s0", 9).empty());
  EXPECT_FALSE(ledger.Awaits("s0"));
  EXPECT_TRUE(ledger.Done("s0", 9).empty()) << "a repeated RunDone counts once";
  EXPECT_FALSE(watch.expired());
  std::vector<KeepAlive> released = ledger.Done("s1", 9);
  ASSERT_EQ(released.size(), 1u);
  released.clear();
  EXPECT_TRUE(watch.expired());
  EXPECT_FALSE(ledger.Awaits("s1"));
  EXPECT_EQ(ledger.runs(), 0u);
}

TEST(ReadsLedgerTest, ALostSchedulerCountsAsEveryRunsDone) {
  ReadsLedger ledger;
  ledger.Hold(1, {"s0"}, {std::make_shared<int>(1)});
  ledger.Hold(2, {"s0", "s1"}, {std::make_shared<int>(2)});
  ledger.Hold(3, {"s1"}, {std::make_shared<int>(3)});
  EXPECT_EQ(ledger.Lost("s0").size(), 1u) << "run 1's reads; run 2 still waits for s1";
  EXPECT_FALSE(ledger.Awaits("s0"));
  EXPECT_EQ(ledger.runs(), 2u);
  EXPECT_EQ(ledger.Done("s1", 2).size(), 1u);
}

TEST(ReadsLedgerTest, UnknownRunsAndSchedulersReleaseNothing) {
  ReadsLedger ledger;
  ledger.Hold(1, {"s0"}, {std::make_shared<int>(1)});
  EXPECT_TRUE(ledger.Done("s0", 2).empty());
  EXPECT_TRUE(ledger.Done("s9", 1).empty());
  EXPECT_EQ(ledger.runs(), 1u);
}

TEST(ReadsLedgerTest, NothingIsHeldWithoutSchedulersOrReads) {
  ReadsLedger ledger;
  ledger.Hold(1, {}, {std::make_shared<int>(1)});
  ledger.Hold(2, {"s0"}, {});
  EXPECT_EQ(ledger.runs(), 0u);
  EXPECT_FALSE(ledger.Awaits("s0"));
}

TEST(ReadsLedgerTest, ASchedulerIsAwaitedWhileAnyOfItsRunsIs) {
  ReadsLedger ledger;
  ledger.Hold(1, {"s0"}, {std::make_shared<int>(1)});
  ledger.Hold(2, {"s0"}, {std::make_shared<int>(2)});
  EXPECT_EQ(ledger.Done("s0", 1).size(), 1u);
  EXPECT_TRUE(ledger.Awaits("s0"));
  EXPECT_EQ(ledger.Done("s0", 2).size(), 1u);
  EXPECT_FALSE(ledger.Awaits("s0"));
}

TEST(ReadsLedgerTest, TakeAllEmptiesTheLedger) {
  ReadsLedger ledger;
  ledger.Hold(1, {"s0"}, {std::make_shared<int>(1), std::make_shared<int>(2)});
  ledger.Hold(2, {"s1"}, {std::make_shared<int>(3)});
  EXPECT_EQ(ledger.TakeAll().size(), 3u);
  EXPECT_EQ(ledger.runs(), 0u);
  EXPECT_FALSE(ledger.Awaits("s0"));
}

}  // namespace
}  // namespace atl
