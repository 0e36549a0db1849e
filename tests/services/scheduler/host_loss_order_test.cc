// IslandOrder when an executor is lost: the queued runs that need it fail at once on the
// live executors, naming the host; its shards in flight count as done so that the window
// moves on; runs submitted while it is lost fail the same way; once it is back, runs use it.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "services/scheduler/island_order.h"
#include "tests/services/scheduler/done_report.h"
#include "tests/status_matchers.h"

namespace atl::scheduler {
namespace {

const Status kLost =
    Unavailable("devices 2,3 on host h1 were lost: its executor missed 4 heartbeats");

// Run `run` of `client`: `nodes` gangs, each with one shard on every executor in `executors`
// (device 0 of each).
proto::SubmitProgram Program(uint64_t client, uint64_t run,
                             const std::vector<std::string>& executors, int nodes) {
  proto::SubmitProgram p;
  p.client_id = client;
  p.run_id = run;
  for (int n = 0; n < nodes; ++n) {
    for (uint32_t s = 0; s < executors.size(); ++s) {
      proto::Entry e;
      e.run_id = run;
      e.node = static_cast<uint32_t>(n);
      e.function_id = 7;
      e.shard = s;
      e.num_shards = static_cast<uint32_t>(executors.size());
      e.owner_client = client;
      p.entries.push_back({executors[s], e});
    }
  }
  return p;
}

// The (run, node) of each entry sent to `executor`, and whether each failed with kLost.
struct Sent {
  std::vector<std::pair<uint64_t, uint32_t>> gangs;
  std::vector<bool> failed;
};
Sent SentTo(const std::map<std::string, proto::Dispatch>& released, const std::string& executor) {
  Sent sent;
  auto it = released.find(executor);
  if (it == released.end()) return sent;
  for (const auto& e : it->second.entries) {
    sent.gangs.emplace_back(e.run_id, e.node);
    sent.failed.push_back(e.error_code == static_cast<int32_t>(Code::kUnavailable) &&
                          e.error == kLost.message());
  }
  return sent;
}

TEST(HostLossOrderTest, QueuedRunsThatNeedTheLostExecutorFailAtOnceOnTheLiveOnes) {
  IslandOrder order(MakeFifoPolicy(), /*window=*/1);
  ASSERT_THAT(order.Submit(Program(1, 10, {"e0", "e1"}, 2)), IsOk());  // needs e1
  ASSERT_THAT(order.Submit(Program(2, 20, {"e0"}, 1)), IsOk());        // does not
  ASSERT_THAT(order.Submit(Program(1, 11, {"e0"}, 1)), IsOk());        // behind run 10: waits
  ASSERT_THAT(order.Submit(Program(1, 12, {"e1"}, 1)), IsOk());        // only on e1
  const auto first = order.Release();
  ASSERT_EQ(SentTo(first, "e0").gangs, (std::vector<std::pair<uint64_t, uint32_t>>{{10, 0}}));
  const uint64_t seq = first.at("e0").entries[0].gang_seq;

  EXPECT_EQ(order.ExecutorLost("e1", kLost), (std::vector<uint64_t>{10, 12}));
  // Run 10's queued node takes its place now on e0, failed naming the host; run 12 had no
  // shard on a live executor; e1 is sent nothing.
  const auto failed = order.Release();
  EXPECT_EQ(failed.count("e1"), 0u);
  const Sent to_e0 = SentTo(failed, "e0");
  ASSERT_EQ(to_e0.gangs, (std::vector<std::pair<uint64_t, uint32_t>>{{10, 1}}));
  EXPECT_TRUE(to_e0.failed[0]);
  EXPECT_EQ(order.queued(), 2u) << "runs 20 and 11 wait for the window";

  // Node 0's shard on e1 is counted done: e0's report alone takes it out of the flight.
  order.OnGangDone("e0", DoneReport(seq, 1));
  order.OnGangDone("e0", DoneReport(seq + 1, 1));  // the failed node 1
  const auto next = order.Release();
  const Sent then = SentTo(next, "e0");
  ASSERT_EQ(then.gangs.size(), 1u);
  EXPECT_FALSE(then.failed[0]) << "a run that does not need e1 runs";
  EXPECT_EQ(then.gangs[0].first, 20u);
}

TEST(HostLossOrderTest, TheLostExecutorsShardsInFlightCountAsDone) {
  IslandOrder order(MakeFifoPolicy(), /*window=*/1);
  ASSERT_THAT(order.Submit(Program(1, 10, {"e0", "e1"}, 1)), IsOk());
  ASSERT_THAT(order.Submit(Program(2, 20, {"e0"}, 1)), IsOk());
  const uint64_t seq = order.Release().at("e0").entries[0].gang_seq;
  order.OnGangDone("e0", DoneReport(seq, 1));
  EXPECT_TRUE(order.Release().empty()) << "e1's shard still runs";

  EXPECT_TRUE(order.ExecutorLost("e1", kLost).empty()) << "run 10 ended with it: none to stop";
  EXPECT_EQ(order.in_flight(), 0u);
  // A late report from the lost executor changes nothing.
  order.OnGangDone("e1", DoneReport(seq, 1));
  const auto next = order.Release();
  ASSERT_EQ(SentTo(next, "e0").gangs, (std::vector<std::pair<uint64_t, uint32_t>>{{20, 0}}));
  EXPECT_FALSE(SentTo(next, "e0").failed[0]);
}

// A run all in flight, with a shard on the lost executor and one still running on e0: it is
// returned, so that the scheduler stops e0's shard, which might wait in a collective for
// the lost one's share (a restarted executor is back at once, without it).
TEST(HostLossOrderTest, ARunInFlightOnTheLostExecutorIsReturnedWhileItsOtherShardsRun) {
  IslandOrder order(MakeFifoPolicy(), /*window=*/0);
  ASSERT_THAT(order.Submit(Program(1, 10, {"e0", "e1"}, 1)), IsOk());
  ASSERT_THAT(order.Submit(Program(2, 20, {"e0"}, 1)), IsOk());
  const auto released = order.Release();
  ASSERT_EQ(SentTo(released, "e1").gangs.size(), 1u);
  EXPECT_EQ(order.ExecutorLost("e1", kLost), (std::vector<uint64_t>{10})) << "run 20 never used e1";
  EXPECT_EQ(order.in_flight(), 2u) << "e0's shards of both runs still report";
}

// The runs ExecutorLost returned are stopped by the caller: their shards failing for it
// later are not a failure to stop them for again.
TEST(HostLossOrderTest, ShardsFailingForTheLossDoNotStopTheirRunAgain) {
  IslandOrder order(MakeFifoPolicy(), /*window=*/0);
  ASSERT_THAT(order.Submit(Program(1, 10, {"e0", "e1"}, 2)), IsOk());
  const auto released = order.Release();
  ASSERT_EQ(SentTo(released, "e0").gangs.size(), 2u);
  EXPECT_EQ(order.ExecutorLost("e1", kLost), (std::vector<uint64_t>{10}));
  proto::GangDone stopped = DoneReport(released.at("e0").entries[0].gang_seq, 1);
  stopped.error_code = static_cast<int32_t>(Code::kUnavailable);
  EXPECT_FALSE(order.OnGangDone("e0", stopped).has_value()) << "node 1 still runs on e0";
}

TEST(HostLossOrderTest, RunsSubmittedWhileItIsLostFailAtOnceUntilItIsBack) {
  IslandOrder order(MakeFifoPolicy(), /*window=*/1);
  EXPECT_TRUE(order.ExecutorLost("e1", kLost).empty());
  ASSERT_THAT(order.Submit(Program(1, 10, {"e0", "e1"}, 3)), IsOk());
  EXPECT_EQ(order.queued(), 0u);
  const Sent refused = SentTo(order.Release(), "e0");
  ASSERT_EQ(refused.gangs.size(), 3u) << "every gang placed, past the window";
  for (bool failed : refused.failed) EXPECT_TRUE(failed);
  EXPECT_EQ(order.in_flight(), 3u) << "e0 still reports the failed shards";

  order.ExecutorBack("e1");
  for (uint64_t seq = 1; seq <= 3; ++seq) order.OnGangDone("e0", DoneReport(seq, 1));
  ASSERT_THAT(order.Submit(Program(1, 11, {"e0", "e1"}, 1)), IsOk());
  const auto released = order.Release();
  ASSERT_EQ(SentTo(released, "e1").gangs.size(), 1u);
  EXPECT_FALSE(SentTo(released, "e1").failed[0]);
  EXPECT_FALSE(SentTo(released, "e0").failed[0]);
}

}  // namespace
}  // namespace atl::scheduler
