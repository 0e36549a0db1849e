// ClientLiveness on a clock moved by hand: a client is silent once heard from no more for
// longer than the lapse, a heartbeat or a restart gives it the full lapse again, and a
// client taken as silent or forgotten is reported no more; a service following the RM's
// table hears its tracked clients from the table and judges nobody while the table is late.
#include "common/service/client_liveness.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace atl {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using namespace std::chrono_literals;

const ClientLiveness::Clock::time_point t0{};

TEST(ClientLivenessTest, AClientIsSilentOnlyPastTheLapse) {
  ClientLiveness clients(300ms);
  clients.Heard(2, t0);
  clients.Heard(1, t0 + 100ms);
  EXPECT_THAT(clients.Silent(t0 + 300ms), IsEmpty());  // exactly the lapse: not yet
  EXPECT_THAT(clients.Silent(t0 + 301ms), ElementsAre(2));
  EXPECT_THAT(clients.Silent(t0 + 401ms), ElementsAre(1, 2));  // in id order
  EXPECT_EQ(clients.size(), 2u);                               // Silent keeps them
}

TEST(ClientLivenessTest, HearingAgainRestartsTheLapse) {
  ClientLiveness clients(300ms);
  clients.Heard(1, t0);
  clients.Heard(1, t0 + 250ms);
  EXPECT_THAT(clients.Silent(t0 + 500ms), IsEmpty());
  EXPECT_THAT(clients.Silent(t0 + 551ms), ElementsAre(1));
}

TEST(ClientLivenessTest, TakeSilentReportsEachClientOnce) {
  ClientLiveness clients(300ms);
  clients.Heard(1, t0);
  clients.Heard(2, t0 + 200ms);
  EXPECT_THAT(clients.TakeSilent(t0 + 400ms), ElementsAre(1));
  EXPECT_FALSE(clients.Tracks(1));
  EXPECT_TRUE(clients.Tracks(2));
  EXPECT_THAT(clients.TakeSilent(t0 + 450ms), IsEmpty());
  EXPECT_THAT(clients.TakeSilent(t0 + 600ms), ElementsAre(2));
  EXPECT_EQ(clients.size(), 0u);
}

TEST(ClientLivenessTest, AForgottenClientIsNeverSilent) {
  ClientLiveness clients(300ms);
  clients.Heard(1, t0);
  clients.Forget(1);
  clients.Forget(7);  // never tracked: nothing happens
  EXPECT_THAT(clients.Silent(t0 + 1s), IsEmpty());
  EXPECT_FALSE(clients.Tracks(1));
}

TEST(ClientLivenessTest, HeardAllGivesEveryClientTheFullLapseAgain) {
  ClientLiveness clients(300ms);
  clients.Heard(1, t0);
  clients.Heard(2, t0 + 100ms);
  clients.HeardAll(t0 + 1s);  // a restarted service: everyone must reconnect first
  EXPECT_THAT(clients.Silent(t0 + 1300ms), IsEmpty());
  EXPECT_THAT(clients.Silent(t0 + 1301ms), ElementsAre(1, 2));
}

TEST(ClientLivenessTest, TheRmsTableHearsOnlyTheTrackedClientsItLists) {
  ClientLiveness clients(300ms);
  clients.FollowTable(200ms, t0);
  clients.Heard(1, t0);
  clients.Heard(2, t0);
  clients.TableHeard({2, 7}, t0 + 150ms);  // 7 is another service's client
  clients.TableHeard({2, 7}, t0 + 300ms);
  EXPECT_FALSE(clients.Tracks(7));
  EXPECT_THAT(clients.TakeSilent(t0 + 301ms), ElementsAre(1));
  EXPECT_THAT(clients.TakeSilent(t0 + 450ms), IsEmpty());
  clients.TableHeard({}, t0 + 450ms);  // the RM dropped 2
  EXPECT_THAT(clients.TakeSilent(t0 + 601ms), ElementsAre(2));
}

TEST(ClientLivenessTest, WhileTheTableIsLateNobodyIsJudgedAndThenEachGetsTheFullLapse) {
  ClientLiveness clients(300ms);
  clients.FollowTable(200ms, t0);
  clients.Heard(1, t0);
  EXPECT_THAT(clients.TakeSilent(t0 + 200ms), IsEmpty());  // on time: judged, not silent
  EXPECT_THAT(clients.TakeSilent(t0 + 1s), IsEmpty());     // no table for 1 s: nobody
  // The RM is back, without 1: a lapse from its first table, 1 is silent.
  for (auto t = t0 + 2s; t <= t0 + 2s + 300ms; t += 100ms) {
    clients.TableHeard({}, t);
    EXPECT_THAT(clients.TakeSilent(t), IsEmpty());
  }
  EXPECT_THAT(clients.TakeSilent(t0 + 2s + 301ms), ElementsAre(1));
}

TEST(ClientLivenessTest, WithoutATableSilenceAloneJudges) {
  ClientLiveness clients(300ms);  // a store run without an RM: its clients beat it
  clients.Heard(1, t0);
  EXPECT_THAT(clients.TakeSilent(t0 + 10s), ElementsAre(1));
}

}  // namespace
}  // namespace atl
