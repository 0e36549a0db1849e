// IslandOrder: one order on every device, the window, sequential runs, and the policies.
#include "services/scheduler/island_order.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <utility>

#include <gtest/gtest.h>

#include "tests/services/scheduler/done_report.h"
#include "tests/status_matchers.h"

namespace atl::scheduler {
namespace {

// A device: (executor endpoint, local device index).
using Device = std::pair<std::string, uint32_t>;

// A program of `nodes` gangs, each with one shard on every device in `devices`.
proto::SubmitProgram MakeProgram(uint64_t client, uint64_t run, const std::vector<Device>& devices,
                                 int nodes, bool sequential = false, double weight = 1.0) {
  proto::SubmitProgram p;
  p.client_id = client;
  p.run_id = run;
  p.weight = weight;
  for (int n = 0; n < nodes; ++n) {
    for (uint32_t s = 0; s < devices.size(); ++s) {
      proto::Entry e;
      e.run_id = run;
      e.node = static_cast<uint32_t>(n);
      e.function_id = 7;
      e.device = devices[s].second;
      e.shard = s;
      e.num_shards = static_cast<uint32_t>(devices.size());
      e.owner_client = client;
      e.sequential = sequential;
      p.entries.push_back({devices[s].first, e});
    }
  }
  return p;
}

// Reports every released gang done, once per executor, as executors do: (executor, report).
std::vector<std::pair<std::string, proto::GangDone>> AllDone(
    const std::map<std::string, proto::Dispatch>& released) {
  std::vector<std::pair<std::string, proto::GangDone>> done;
  for (const auto& [exec, d] : released) {
    std::map<uint64_t, uint32_t> shards;  // by gang
    for (const auto& e : d.entries) shards[e.gang_seq]++;
    for (const auto& [seq, n] : shards) done.emplace_back(exec, DoneReport(seq, n, 100));
  }
  return done;
}

TEST(IslandOrderTest, EveryDeviceSeesGangsInTheSameOrder) {
  for (const char* policy : {"fifo", "share"}) {
    IslandOrder order(std::move(MakePolicy(policy).value()), /*window=*/3);
    std::mt19937 rng(11);
    const std::vector<Device> all = {{"e0", 0}, {"e0", 1}, {"e1", 0}, {"e1", 1}};
    // Per device, the gang sequence numbers in the order its executor received them.
    std::map<Device, std::vector<uint64_t>> seen;
    uint64_t run = 1;
    for (int round = 0; round < 200; ++round) {
      // Random clients submit programs over random overlapping subsets of the devices.
      std::vector<Device> subset;
      for (const auto& d : all) {
        if (rng() % 2) subset.push_back(d);
      }
      if (subset.empty()) subset.push_back(all[rng() % all.size()]);
      ASSERT_THAT(order.Submit(MakeProgram(rng() % 5, run++, subset, 1 + rng() % 3)), IsOk());
      auto released = order.Release();
      for (const auto& [exec, dispatch] : released) {
        for (const auto& e : dispatch.entries) seen[{exec, e.device}].push_back(e.gang_seq);
      }
      for (const auto& [exec, done] : AllDone(released)) order.OnGangDone(exec, done);
    }
    // Drain.
    for (int i = 0; i < 1000 && order.queued() > 0; ++i) {
      auto released = order.Release();
      for (const auto& [exec, dispatch] : released) {
        for (const auto& e : dispatch.entries) seen[{exec, e.device}].push_back(e.gang_seq);
      }
      for (const auto& [exec, done] : AllDone(released)) order.OnGangDone(exec, done);
    }
    EXPECT_EQ(order.queued(), 0u);
    // Each device receives gangs in increasing sequence order, so any two gangs that share
    // devices are in the same relative order on all of them.
    std::map<uint64_t, std::map<Device, size_t>> position;
    for (const auto& [device, seqs] : seen) {
      for (size_t i = 0; i < seqs.size(); ++i) {
        if (i > 0) {
          EXPECT_LT(seqs[i - 1], seqs[i])
              << policy << " device " << device.first << "/" << device.second;
        }
        position[seqs[i]][device] = i;
      }
    }
    for (const auto& [a, pa] : position) {
      for (const auto& [b, pb] : position) {
        if (a >= b) continue;
        std::set<bool> orders;
        for (const auto& [device, i] : pa) {
          if (auto it = pb.find(device); it != pb.end()) orders.insert(i < it->second);
        }
        EXPECT_LE(orders.size(), 1u) << policy << ": gangs " << a << " and " << b
                                     << " are in different orders on different devices";
      }
    }
  }
}

TEST(IslandOrderTest, FifoWithoutWindowReleasesAWholeProgramAtOnceInOneMessagePerExecutor) {
  IslandOrder order(MakeFifoPolicy(), 0);
  ASSERT_THAT(order.Submit(MakeProgram(1, 1, {{"e0", 0}, {"e1", 0}}, 4)), IsOk());
  auto released = order.Release();
  ASSERT_EQ(released.size(), 2u);
  for (const auto& [exec, dispatch] : released) {
    ASSERT_EQ(dispatch.entries.size(), 4u) << exec;
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(dispatch.entries[i].gang_seq, i + 1);
  }
  EXPECT_EQ(order.in_flight(), 4u);
}

TEST(IslandOrderTest, TheWindowBoundsGangsInFlight) {
  IslandOrder order(MakeFifoPolicy(), 2);
  ASSERT_THAT(order.Submit(MakeProgram(1, 1, {{"e0", 0}}, 5)), IsOk());
  auto first = order.Release();
  EXPECT_EQ(first.at("e0").entries.size(), 2u);
  EXPECT_TRUE(order.Release().empty());
  order.OnGangDone("e0", DoneReport(first.at("e0").entries[0].gang_seq, 1));
  auto next = order.Release();
  ASSERT_EQ(next.at("e0").entries.size(), 1u);
  EXPECT_EQ(next.at("e0").entries[0].node, 2u);
}

TEST(IslandOrderTest, AGangLeavesTheFlightWhenReportsCoverAllItsShards) {
  IslandOrder order(MakeFifoPolicy(), 1);
  // Three shards on e0, one on e1: e0 reports them in one record.
  ASSERT_THAT(order.Submit(MakeProgram(1, 1, {{"e0", 0}, {"e0", 1}, {"e0", 2}, {"e1", 0}}, 2)),
              IsOk());
  auto first = order.Release();
  const uint64_t seq = first.at("e0").entries[0].gang_seq;
  order.OnGangDone("e0", DoneReport(seq, 3));
  EXPECT_TRUE(order.Release().empty()) << "released while e1's shard runs";
  order.OnGangDone("e1", DoneReport(seq, 1));
  EXPECT_EQ(order.in_flight(), 0u);
  EXPECT_EQ(order.Release().at("e0").entries.size(), 3u);
  // A report covering more shards than its executor has left (a duplicate) does not
  // underflow, nor count for another executor's shards.
  order.OnGangDone("e0", DoneReport(seq + 1, 9));
  EXPECT_EQ(order.in_flight(), 1u) << "e1's shard still runs";
  order.OnGangDone("e1", DoneReport(seq + 1, 1));
  EXPECT_EQ(order.in_flight(), 0u);
}

TEST(IslandOrderTest, ASequentialRunReleasesANodeOnlyWhenThePreviousOneIsDone) {
  IslandOrder order(MakeFifoPolicy(), 0);
  ASSERT_THAT(order.Submit(MakeProgram(1, 1, {{"e0", 0}, {"e1", 0}}, 3, true)), IsOk());
  for (uint32_t node = 0; node < 3; ++node) {
    auto released = order.Release();
    ASSERT_EQ(released.size(), 2u) << node;
    for (const auto& [exec, d] : released) {
      ASSERT_EQ(d.entries.size(), 1u);
      EXPECT_EQ(d.entries[0].node, node);
    }
    EXPECT_TRUE(order.Release().empty()) << "node " << node + 1 << " released early";
    // Done on one executor only: still in flight.
    order.OnGangDone("e0", DoneReport(released.at("e0").entries[0].gang_seq, 1));
    EXPECT_TRUE(order.Release().empty());
    order.OnGangDone("e1", DoneReport(released.at("e1").entries[0].gang_seq, 1));
  }
}

TEST(IslandOrderTest, ProportionalShareGivesBackloggedClientsTimeByWeight) {
  IslandOrder order(MakeProportionalSharePolicy(), 1);
  const std::map<uint64_t, double> weights = {{1, 1}, {2, 2}, {3, 4}, {4, 8}};
  uint64_t run = 1;
  std::map<uint64_t, int> released_per_client;
  for (const auto& [client, w] : weights) {
    ASSERT_THAT(order.Submit(MakeProgram(client, run++, {{"e0", 0}}, 1, false, w)), IsOk());
  }
  for (int i = 0; i < 1500; ++i) {
    auto released = order.Release();
    ASSERT_EQ(released.size(), 1u);
    const auto& e = released.at("e0").entries.at(0);
    released_per_client[e.owner_client]++;
    // Every client stays backlogged: it submits again as soon as a gang of its ran.
    ASSERT_THAT(order.Submit(MakeProgram(e.owner_client, run++, {{"e0", 0}}, 1, false,
                                         weights.at(e.owner_client))),
                IsOk());
    order.OnGangDone("e0", DoneReport(e.gang_seq, 1, 330));
  }
  for (const auto& [client, w] : weights) {
    const double share = released_per_client[client] / 1500.0;
    EXPECT_NEAR(share, w / 15.0, 0.05 * w / 15.0) << "client " << client;
  }
}

TEST(IslandOrderTest, MalformedSubgraphsAreRefused) {
  IslandOrder order(MakeFifoPolicy(), 0);
  EXPECT_EQ(order.Submit(proto::SubmitProgram{}).code(), Code::kInvalidArgument);
  auto split = MakeProgram(1, 1, {{"e0", 0}}, 2);
  std::swap(split.entries[0], split.entries[1]);
  split.entries.push_back(split.entries[0]);
  EXPECT_EQ(order.Submit(split).code(), Code::kInvalidArgument);
  auto weightless = MakeProgram(1, 1, {{"e0", 0}}, 1, false, 0.0);
  EXPECT_EQ(order.Submit(weightless).code(), Code::kInvalidArgument);
  EXPECT_EQ(order.queued(), 0u);
}

TEST(IslandOrderTest, AClientsUnfinishedRunsAreThoseQueuedOrInFlight) {
  IslandOrder order(MakeFifoPolicy(), 0);
  ASSERT_THAT(order.Submit(MakeProgram(1, 1, {{"e0", 0}}, 1)), IsOk());
  ASSERT_THAT(order.Submit(MakeProgram(1, 2, {{"e0", 0}}, 1)), IsOk());
  ASSERT_THAT(order.Submit(MakeProgram(2, 3, {{"e0", 0}}, 1)), IsOk());
  auto released = order.Release();
  EXPECT_EQ(order.UnfinishedRuns(1), (std::vector<uint64_t>{1, 2}));
  order.OnGangDone("e0", DoneReport(released.at("e0").entries[0].gang_seq, 1));
  EXPECT_EQ(order.UnfinishedRuns(1), (std::vector<uint64_t>{2}));
  EXPECT_EQ(order.UnfinishedRuns(2), (std::vector<uint64_t>{3}));
  EXPECT_TRUE(order.UnfinishedRuns(9).empty());
  EXPECT_EQ(order.UnfinishedRunCount(1), 1u);
  EXPECT_EQ(order.UnfinishedRunCount(2), 1u);
  EXPECT_EQ(order.UnfinishedRunCount(9), 0u);
}

// What the runs_in_flight quota counts: a run from its submission until it finishes here,
// whether it ran, failed, was cancelled, was dropped with its client or needed a lost
// executor. Random interleavings of all of those, checked against UnfinishedRuns.
TEST(IslandOrderTest, AClientsUnfinishedRunCountFollowsEveryWayARunEnds) {
  for (size_t window : {size_t{0}, size_t{2}}) {
    IslandOrder order(MakeFifoPolicy(), window);
    std::mt19937 rng(5);
    const std::vector<Device> all = {{"e0", 0}, {"e1", 0}, {"e2", 0}};
    std::vector<std::pair<std::string, proto::GangDone>> reports;  // released, not reported
    uint64_t run = 1;
    for (int step = 0; step < 2000; ++step) {
      const uint64_t client = 1 + rng() % 3;
      switch (rng() % 8) {
        case 0:
        case 1:
        case 2: {
          const unsigned mask = 1 + rng() % 7;  // a nonempty subset of the three devices
          std::vector<Device> subset;
          for (size_t d = 0; d < all.size(); ++d) {
            if (mask & (1u << d)) subset.push_back(all[d]);
          }
          ASSERT_THAT(order.Submit(MakeProgram(client, run++, subset, 1 + rng() % 3)), IsOk());
          break;
        }
        case 3:
        case 4:  // executors report in any order
          if (!reports.empty()) {
            const size_t i = rng() % reports.size();
            order.OnGangDone(reports[i].first, reports[i].second);
            reports.erase(reports.begin() + static_cast<std::ptrdiff_t>(i));
          }
          break;
        case 5:
          if (run > 1) (void)order.CancelRun(client, 1 + rng() % (run - 1), Cancelled("cancel"));
          break;
        case 6:
          if (rng() % 4 == 0) (void)order.DropClient(client, Cancelled("goodbye"));
          break;
        case 7:
          if (rng() % 8 == 0) {
            const std::string executor = all[rng() % all.size()].first;
            (void)order.ExecutorLost(executor, Unavailable("lost"));
            std::erase_if(reports, [&](const auto& r) { return r.first == executor; });
            order.ExecutorBack(executor);
          }
          break;
      }
      for (const auto& report : AllDone(order.Release())) reports.push_back(report);
      for (uint64_t c = 1; c <= 3; ++c) {
        ASSERT_EQ(order.UnfinishedRunCount(c), order.UnfinishedRuns(c).size())
            << "client " << c << " at step " << step << ", window " << window;
      }
    }
    // Everything reported: nothing is in flight any more.
    for (int i = 0; i < 10000 && (!reports.empty() || order.queued() > 0); ++i) {
      for (const auto& [exec, done] : std::exchange(reports, {})) order.OnGangDone(exec, done);
      for (const auto& report : AllDone(order.Release())) reports.push_back(report);
    }
    for (uint64_t c = 1; c <= 3; ++c) EXPECT_EQ(order.UnfinishedRunCount(c), 0u) << c;
  }
}

TEST(IslandOrderTest, ARunFinishesWhenEveryGangOfItLeftTheFlight) {
  IslandOrder order(MakeFifoPolicy(), 0);
  proto::SubmitProgram reads = MakeProgram(1, 1, {{"e0", 0}, {"e1", 0}}, 2);
  reads.notify_done = true;
  ASSERT_THAT(order.Submit(reads), IsOk());
  ASSERT_THAT(order.Submit(MakeProgram(1, 2, {{"e0", 0}}, 1)), IsOk());
  auto released = order.Release();
  // Run 1's first gang done on both executors, its second on e0 only: not finished.
  const uint64_t first = released.at("e0").entries[0].gang_seq;
  const uint64_t second = released.at("e0").entries[1].gang_seq;
  order.OnGangDone("e0", DoneReport(first, 1));
  order.OnGangDone("e1", DoneReport(first, 1));
  order.OnGangDone("e0", DoneReport(second, 1));
  EXPECT_TRUE(order.TakeFinishedRuns().empty());
  // A failed gang counts as done.
  proto::GangDone failed = DoneReport(second, 1);
  failed.error_code = static_cast<int32_t>(Code::kInternal);
  order.OnGangDone("e1", failed);
  auto finished = order.TakeFinishedRuns();
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].client, 1u);
  EXPECT_EQ(finished[0].run, 1u);
  EXPECT_TRUE(finished[0].notify_done);
  // Run 2 did not ask to hear it, but finishes all the same (its bookkeeping goes).
  order.OnGangDone("e0", DoneReport(released.at("e0").entries[2].gang_seq, 1));
  finished = order.TakeFinishedRuns();
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].run, 2u);
  EXPECT_FALSE(finished[0].notify_done);
  EXPECT_TRUE(order.TakeFinishedRuns().empty());
}

TEST(IslandOrderTest, ACancelledRunsQueuedGangsArePlacedFailedAtOnce) {
  IslandOrder order(MakeFifoPolicy(), /*window=*/1);
  ASSERT_THAT(order.Submit(MakeProgram(1, 1, {{"e0", 0}}, 1)), IsOk());
  ASSERT_THAT(order.Submit(MakeProgram(1, 2, {{"e0", 0}, {"e1", 0}}, 3)), IsOk());
  ASSERT_THAT(order.Submit(MakeProgram(1, 3, {{"e0", 0}}, 1)), IsOk());
  auto running = order.Release();  // run 1's gang; the window holds the rest
  ASSERT_EQ(running.at("e0").entries.size(), 1u);

  EXPECT_FALSE(order.CancelRun(2, 2, Cancelled("not yours"))) << "another client's run";
  EXPECT_FALSE(order.CancelRun(1, 99, Cancelled("unknown")));
  EXPECT_TRUE(order.CancelRun(1, 2, Cancelled("run 2 was cancelled")));
  // Placed at once, ahead of run 1's flight and the window: they run nothing.
  auto cancelled = order.Release();
  for (const char* exec : {"e0", "e1"}) {
    ASSERT_EQ(cancelled.at(exec).entries.size(), 3u) << exec;
    for (const auto& e : cancelled.at(exec).entries) {
      EXPECT_EQ(e.run_id, 2u);
      EXPECT_EQ(e.error_code, static_cast<int32_t>(Code::kCancelled));
      EXPECT_EQ(e.error, "run 2 was cancelled");
    }
  }
  EXPECT_EQ(order.queued(), 1u);  // run 3 is untouched
  // Its executors report the failed gangs: the run finishes, and cancelling it is moot.
  for (const auto& [exec, done] : AllDone(cancelled)) order.OnGangDone(exec, done);
  auto finished = order.TakeFinishedRuns();
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].run, 2u);
  EXPECT_FALSE(order.CancelRun(1, 2, Cancelled("again")));
  // Run 3 goes once run 1 leaves the window.
  for (const auto& [exec, done] : AllDone(running)) order.OnGangDone(exec, done);
  auto next = order.Release();
  ASSERT_EQ(next.at("e0").entries.size(), 1u);
  EXPECT_EQ(next.at("e0").entries[0].run_id, 3u);
  EXPECT_EQ(next.at("e0").entries[0].error_code, 0);
}

TEST(IslandOrderTest, CancellingARunAllInFlightSaysItIsHere) {
  IslandOrder order(MakeFifoPolicy(), 0);
  ASSERT_THAT(order.Submit(MakeProgram(1, 1, {{"e0", 0}}, 2)), IsOk());
  auto released = order.Release();
  EXPECT_TRUE(order.CancelRun(1, 1, Cancelled("stop")));  // its executors must hear it
  EXPECT_TRUE(order.Release().empty());
}

// A shard that failed while its partners run: the first report of it names the run, once,
// so that the scheduler tells its client and stops the rest; a cancelled shard names
// nothing; a failure that finished the run names it as finished.
TEST(IslandOrderTest, TheFirstFailedShardOfARunNamesItOnce) {
  IslandOrder order(MakeFifoPolicy(), 0);
  ASSERT_THAT(order.Submit(MakeProgram(1, 1, {{"e0", 0}, {"e1", 0}}, 2)), IsOk());
  ASSERT_THAT(order.Submit(MakeProgram(2, 2, {{"e0", 0}}, 2)), IsOk());
  auto released = order.Release();
  const auto& to_e1 = released.at("e1").entries;
  ASSERT_EQ(to_e1.size(), 2u);

  proto::GangDone failed = DoneReport(to_e1[0].gang_seq, 1);
  failed.error_code = static_cast<int32_t>(Code::kNotFound);
  failed.error = "NotFound: function 7 was never compiled on host h1";
  auto stop = order.OnGangDone("e1", failed);
  ASSERT_TRUE(stop.has_value()) << "e0's shard of the gang may wait in a collective";
  EXPECT_EQ(stop->client, 1u);
  EXPECT_EQ(stop->run, 1u);
  failed.gang_seq = to_e1[1].gang_seq;  // its next node fails too: already stopping
  EXPECT_FALSE(order.OnGangDone("e1", failed).has_value());

  // Run 2, cancelled here: its cancelled shard is asked for, and its run stops by the cancel
  // itself.
  const auto& to_e0 = released.at("e0").entries;
  const auto run2 =
      std::find_if(to_e0.begin(), to_e0.end(), [](const proto::Entry& e) { return e.run_id == 2; });
  ASSERT_NE(run2, to_e0.end());
  ASSERT_TRUE(order.CancelRun(2, 2, Cancelled("run 2 was cancelled by client 2")));
  proto::GangDone cancelled = DoneReport(run2->gang_seq, 1);
  cancelled.error_code = static_cast<int32_t>(Code::kCancelled);
  EXPECT_FALSE(order.OnGangDone("e0", cancelled).has_value());
  // Its last gang failing finishes it: named for its client, with nothing left to stop.
  proto::GangDone last = DoneReport(std::next(run2)->gang_seq, 1);
  last.error_code = static_cast<int32_t>(Code::kInternal);
  auto finished = order.OnGangDone("e0", last);
  ASSERT_TRUE(finished.has_value());
  EXPECT_EQ(finished->run, 2u);
  EXPECT_TRUE(finished->finished);
  EXPECT_FALSE(stop->finished);
}

// A shard cancelled though nobody cancelled its run here (a store refused the output of a
// client it took for gone) fails the run like any error: its client waits for it otherwise.
// A dropped client's runs are cancelled here: their reports name nothing.
TEST(IslandOrderTest, ACancelledShardOfARunNotCancelledHereNamesIt) {
  IslandOrder order(MakeFifoPolicy(), 0);
  ASSERT_THAT(order.Submit(MakeProgram(1, 1, {{"e0", 0}}, 2)), IsOk());
  ASSERT_THAT(order.Submit(MakeProgram(2, 2, {{"e0", 0}}, 1)), IsOk());
  auto released = order.Release();
  const auto& to_e0 = released.at("e0").entries;
  ASSERT_EQ(to_e0.size(), 3u);
  ASSERT_EQ(to_e0[0].run_id, 1u);
  proto::GangDone refused = DoneReport(to_e0[0].gang_seq, 1);
  refused.error_code = static_cast<int32_t>(Code::kCancelled);
  refused.error = "Cancelled: PutObject: client 1 said goodbye";
  auto stop = order.OnGangDone("e0", refused);
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(stop->run, 1u);
  EXPECT_FALSE(stop->finished);

  (void)order.DropClient(2, Cancelled("client 2 said goodbye"));
  ASSERT_EQ(to_e0[2].run_id, 2u);
  proto::GangDone dropped = DoneReport(to_e0[2].gang_seq, 1);
  dropped.error_code = static_cast<int32_t>(Code::kCancelled);
  EXPECT_FALSE(order.OnGangDone("e0", dropped).has_value());
}

}  // namespace
}  // namespace atl::scheduler
