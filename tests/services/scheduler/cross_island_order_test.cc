// IslandOrder across islands: a gang fed by other islands waits for their notices, a
// placed producer announces itself, and a run held too long fails instead of hanging.
#include <gtest/gtest.h>

#include "services/scheduler/island_order.h"
#include "tests/status_matchers.h"

namespace atl::scheduler {
namespace {

// Run `run` of client 1: nodes `nodes` here, one shard each on executor "e0", device 0.
proto::SubmitProgram Subgraph(uint64_t run, std::vector<uint32_t> nodes,
                              std::vector<proto::CrossIslandNode> cross = {}) {
  proto::SubmitProgram p;
  p.client_id = 1;
  p.run_id = run;
  for (uint32_t node : nodes) {
    proto::Entry e;
    e.run_id = run;
    e.node = node;
    e.num_shards = 1;
    e.owner_client = 1;
    p.entries.push_back({"e0", e});
  }
  p.cross_island = std::move(cross);
  return p;
}

std::vector<uint32_t> NodesOf(const std::map<std::string, proto::Dispatch>& released) {
  std::vector<uint32_t> nodes;
  if (auto it = released.find("e0"); it != released.end()) {
    for (const auto& e : it->second.entries) nodes.push_back(e.node);
  }
  return nodes;
}

TEST(CrossIslandOrderTest, AGangFedByAnotherIslandWaitsForItsProducersPlaces) {
  IslandOrder order(MakeFifoPolicy(), 0);
  // Nodes 0 and 2 here; node 2 is fed by node 1 on another island.
  ASSERT_THAT(order.Submit(Subgraph(5, {0, 2}, {{2, {1}, {}}})), IsOk());
  EXPECT_EQ(NodesOf(order.Release()), std::vector<uint32_t>{0});
  EXPECT_TRUE(order.Release().empty());
  order.OnPeerReleased(5, 7);  // another run's node, or another node: no effect
  order.OnPeerReleased(6, 1);
  EXPECT_TRUE(order.Release().empty());
  order.OnPeerReleased(5, 1);
  EXPECT_EQ(NodesOf(order.Release()), std::vector<uint32_t>{2});
}

TEST(CrossIslandOrderTest, ANoticeThatComesBeforeTheRunCounts) {
  IslandOrder order(MakeFifoPolicy(), 0);
  order.OnPeerReleased(5, 0);
  ASSERT_THAT(order.Submit(Subgraph(5, {1}, {{1, {0}, {}}})), IsOk());
  EXPECT_EQ(NodesOf(order.Release()), std::vector<uint32_t>{1});
}

TEST(CrossIslandOrderTest, AHeldRunHoldsOnlyItsOwnClientsLaterRuns) {
  IslandOrder order(MakeFifoPolicy(), 0);
  ASSERT_THAT(order.Submit(Subgraph(5, {1}, {{1, {0}, {}}})), IsOk());
  ASSERT_THAT(order.Submit(Subgraph(6, {0})), IsOk());  // same client, behind run 5
  auto other = Subgraph(7, {0});
  other.client_id = 2;
  other.entries[0].entry.owner_client = 2;
  ASSERT_THAT(order.Submit(other), IsOk());
  auto released = order.Release();
  ASSERT_EQ(released.at("e0").entries.size(), 1u);
  EXPECT_EQ(released.at("e0").entries[0].run_id, 7u);
  order.OnPeerReleased(5, 0);
  released = order.Release();
  ASSERT_EQ(released.at("e0").entries.size(), 2u);
  EXPECT_EQ(released.at("e0").entries[0].run_id, 5u);
  EXPECT_EQ(released.at("e0").entries[1].run_id, 6u);
}

TEST(CrossIslandOrderTest, APlacedProducerIsAnnouncedToEveryIslandItFeeds) {
  IslandOrder order(MakeFifoPolicy(), 1);
  ASSERT_THAT(order.Submit(Subgraph(5, {0, 1}, {{1, {}, {"s1", "s2"}}})), IsOk());
  auto first = order.Release();
  EXPECT_EQ(NodesOf(first), std::vector<uint32_t>{0});
  EXPECT_TRUE(order.TakeNotices().empty()) << "node 0 feeds no other island";
  proto::GangDone done;
  done.gang_seq = first.at("e0").entries[0].gang_seq;
  done.shards = 1;
  order.OnGangDone("e0", done);
  EXPECT_EQ(NodesOf(order.Release()), std::vector<uint32_t>{1});
  auto notices = order.TakeNotices();
  ASSERT_EQ(notices.size(), 2u);
  EXPECT_EQ(notices[0].scheduler, "s1");
  EXPECT_EQ(notices[1].scheduler, "s2");
  EXPECT_EQ(notices[0].released, (proto::NodeReleased{5, 1}));
  EXPECT_TRUE(order.TakeNotices().empty());
}

TEST(CrossIslandOrderTest, ARunHeldLongerThanAllowedFailsAndStillAnnouncesItsNodes) {
  IslandOrder order(MakeFifoPolicy(), 0);
  // Node 1 waits for node 0 elsewhere; node 2 follows it here and feeds island s1.
  ASSERT_THAT(order.Submit(Subgraph(5, {1, 2}, {{1, {0}, {}}, {2, {}, {"s1"}}})), IsOk());
  EXPECT_TRUE(order.Release().empty());
  EXPECT_TRUE(order.Expire(1'000, 500).empty()) << "first seen held now";
  EXPECT_TRUE(order.Expire(1'400, 500).empty()) << "held 400 us of 500";
  auto expired = order.Expire(1'600, 500);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].run, 5u);
  EXPECT_EQ(expired[0].node, 1u);
  EXPECT_EQ(expired[0].waiting_for, std::vector<uint32_t>{0});
  auto released = order.Release();
  ASSERT_EQ(NodesOf(released), (std::vector<uint32_t>{1, 2}));
  for (const auto& e : released.at("e0").entries) {
    EXPECT_EQ(e.error_code, static_cast<int32_t>(Code::kDeadlineExceeded));
    EXPECT_NE(e.error.find("waited over 0 ms for nodes 0 of other islands"), std::string::npos)
        << e.error;
  }
  auto notices = order.TakeNotices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].released, (proto::NodeReleased{5, 2}));
  EXPECT_EQ(order.queued(), 0u);
}

TEST(CrossIslandOrderTest, AGangReleasedInTimeNeverExpires) {
  IslandOrder order(MakeFifoPolicy(), 0);
  ASSERT_THAT(order.Submit(Subgraph(5, {1}, {{1, {0}, {}}})), IsOk());
  EXPECT_TRUE(order.Expire(0, 500).empty());
  order.OnPeerReleased(5, 0);
  EXPECT_TRUE(order.Expire(10'000, 500).empty());
  auto released = order.Release();
  ASSERT_EQ(NodesOf(released), std::vector<uint32_t>{1});
  EXPECT_EQ(released.at("e0").entries[0].error_code, 0);
}

TEST(CrossIslandOrderTest, ACrossIslandNodeThatIsNotHereIsRefused) {
  IslandOrder order(MakeFifoPolicy(), 0);
  EXPECT_EQ(order.Submit(Subgraph(5, {0}, {{3, {1}, {}}})).code(), Code::kInvalidArgument);
  EXPECT_EQ(order.queued(), 0u);
}

TEST(CrossIslandOrderTest, ADroppedClientsQueuedRunsFailAndAnnounceButOthersStay) {
  IslandOrder order(MakeFifoPolicy(), 0);
  ASSERT_THAT(order.Submit(Subgraph(5, {1, 2}, {{1, {0}, {}}, {2, {}, {"s1"}}})), IsOk());
  ASSERT_THAT(order.Submit(Subgraph(6, {0})), IsOk());
  auto other = Subgraph(7, {0, 1}, {{1, {5}, {}}});
  other.client_id = 2;
  ASSERT_THAT(order.Submit(other), IsOk());
  auto released = order.Release();
  EXPECT_EQ(NodesOf(released), std::vector<uint32_t>{0}) << "client 2's first gang";
  EXPECT_EQ(order.DropClient(1, Cancelled("client 1 said goodbye")), 2u);
  released = order.Release();
  ASSERT_EQ(NodesOf(released), (std::vector<uint32_t>{1, 2, 0}));
  for (const auto& e : released.at("e0").entries) {
    EXPECT_EQ(e.error_code, static_cast<int32_t>(Code::kCancelled));
    EXPECT_EQ(e.error, "client 1 said goodbye") << "run " << e.run_id << " node " << e.node;
  }
  ASSERT_EQ(order.TakeNotices().size(), 1u);
  EXPECT_EQ(order.queued(), 1u) << "client 2's held gang stays";
  EXPECT_EQ(order.DropClient(1, Cancelled("again")), 0u);
}

}  // namespace
}  // namespace atl::scheduler
