// ServiceLosses: a run fails for the first loss, after its submission, of a service it
// needs; a submission needing a service that is down now is refused until the RM says it is
// back; dropped connections count once per drop; the stores are looked at once a period.
#include "client/service_losses.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/status_matchers.h"

namespace atl {
namespace {

using std::chrono::milliseconds;

proto::ServiceChanged Changed(uint8_t role, std::string name, std::string endpoint, bool lost,
                              std::string reason = "") {
  proto::ServiceChanged changed;
  changed.role = role;
  changed.name = std::move(name);
  changed.endpoint = std::move(endpoint);
  changed.lost = lost;
  changed.reason = std::move(reason);
  return changed;
}

ServicesNeeded Needs(std::set<std::string> schedulers, std::set<std::string> stores,
                     std::set<std::string> hosts) {
  return {std::move(schedulers), std::move(stores), std::move(hosts)};
}

TEST(ServiceLossesTest, ARunFailsForTheFirstLossSinceItsSubmissionOfWhatItNeeds) {
  ServiceLosses losses;
  const ServicesNeeded needs = Needs({"tcp://s0"}, {"tcp://h1.store"}, {"h1"});
  losses.Notice(Changed(proto::Heartbeat::kExecutor, "h9", "", true, "host h9 lost"));
  const size_t seen = losses.seen();  // submitted now
  EXPECT_EQ(losses.LossFor(needs, seen), nullptr);
  // Another island's scheduler, then h1's executor, then h1's store.
  losses.Notice(Changed(proto::Heartbeat::kScheduler, "b", "tcp://s1", true, "island b lost"));
  EXPECT_EQ(losses.LossFor(needs, seen), nullptr);
  losses.Notice(Changed(proto::Heartbeat::kExecutor, "h1", "", true, "host h1 lost"));
  losses.Notice(Changed(proto::Heartbeat::kStore, "h1", "tcp://h1.store", true, "store lost"));
  const Loss* loss = losses.LossFor(needs, seen);
  ASSERT_NE(loss, nullptr);
  EXPECT_EQ(loss->reason, "host h1 lost");
  // A run submitted after those losses does not fail for them.
  EXPECT_EQ(losses.LossFor(needs, losses.seen()), nullptr);
}

TEST(ServiceLossesTest, ASubmissionIsRefusedWhileWhatItNeedsIsDown) {
  ServiceLosses losses;
  const ServicesNeeded needs = Needs({"tcp://s0"}, {}, {});
  const Loss* lost =
      losses.Notice(Changed(proto::Heartbeat::kScheduler, "a", "tcp://s0", true, "island a lost"));
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->endpoint, "tcp://s0");
  EXPECT_THAT(losses.CheckUp(5, needs), StatusIs(Code::kUnavailable, "run 5: island a lost"));
  EXPECT_THAT(losses.CheckUp(5, Needs({"tcp://s1"}, {}, {"h0"})), IsOk());
  EXPECT_EQ(losses.Notice(Changed(proto::Heartbeat::kScheduler, "a", "tcp://s0", false)), nullptr);
  EXPECT_THAT(losses.CheckUp(5, needs), IsOk());
  EXPECT_EQ(losses.seen(), 1u) << "a return is no loss";
}

TEST(ServiceLossesTest, ADroppedConnectionIsALossButNotDown) {
  ServiceLosses losses;
  EXPECT_FALSE(losses.Dropped("tcp://s0", 0)) << "no drop yet";
  EXPECT_TRUE(losses.Dropped("tcp://s0", 1));
  EXPECT_FALSE(losses.Dropped("tcp://s0", 1)) << "the same drop counts once";
  EXPECT_TRUE(losses.Dropped("tcp://s0", 3));
  const Loss& loss = losses.Lose(ServiceLosses::DroppedConnection(
      proto::Heartbeat::kScheduler, "", "tcp://s0", "the scheduler of island a (tcp://s0)"));
  EXPECT_THAT(loss.reason, ::testing::HasSubstr("the scheduler of island a (tcp://s0) was lost: "
                                                "its connection dropped"));
  const ServicesNeeded needs = Needs({"tcp://s0"}, {}, {});
  EXPECT_NE(losses.LossFor(needs, 0), nullptr);
  EXPECT_THAT(losses.CheckUp(1, needs), IsOk()) << "it may be back at once";
}

TEST(ServiceLossesTest, StoresAreLookedAtOnceANoticePeriod) {
  ServiceLosses losses;
  losses.notice_period = milliseconds(25);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(losses.StoresDue(t0)) << "the first look is due at once";
  EXPECT_FALSE(losses.StoresDue(t0 + milliseconds(24)));
  EXPECT_TRUE(losses.StoresDue(t0 + milliseconds(25)));
  EXPECT_FALSE(losses.StoresDue(t0 + milliseconds(30)));
}

TEST(ServiceLossesTest, NeedsGrowWithTheInputsProducers) {
  ServicesNeeded needs = Needs({"s0"}, {}, {"h0"});
  needs.Add(Needs({"s1"}, {"st1"}, {"h0", "h1"}));
  EXPECT_TRUE(needs.Needs({proto::Heartbeat::kScheduler, "b", "s1", ""}));
  EXPECT_TRUE(needs.Needs({proto::Heartbeat::kStore, "h1", "st1", ""}));
  EXPECT_TRUE(needs.Needs({proto::Heartbeat::kExecutor, "h1", "", ""}));
  EXPECT_FALSE(needs.Needs({proto::Heartbeat::kExecutor, "h2", "", ""}));
  EXPECT_FALSE(needs.Needs({proto::Heartbeat::kStore, "h1", "st9", ""})) << "stores by endpoint";
}

}  // namespace
}  // namespace atl
