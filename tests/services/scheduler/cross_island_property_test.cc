// The property behind "One order across islands": whatever programs many clients run across
// two to four islands, in whatever order their messages arrive and their shards finish,
// every run completes. Each island has its own IslandOrder; a small simulation stands in
// for the wire (FIFO channels, delivered in a random interleaving), the clients, and the
// executors (in-order device queues; a collective's shards start only together, at the
// heads of all their devices). A cycle of waits shows up as a state where nothing can move
// and some run is unfinished.
#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "services/scheduler/island_order.h"
#include "tests/status_matchers.h"

namespace atl::scheduler {
namespace {

constexpr int kDevicesPerIsland = 4;  // 2 hosts x 2 devices

struct NodeSpec {
  int island = 0;
  std::vector<int> devices;  // within the island, 0..3: host d/2, local device d%2
  bool collective = false;   // its shards start together (an all-reduce)
  std::vector<int> inputs;   // earlier nodes of the run
};

struct RunSpec {
  uint64_t client = 0;
  uint64_t run = 0;
  std::vector<NodeSpec> nodes;
};

std::string Scheduler(int island) { return "s" + std::to_string(island); }
std::string Executor(int island, int device) {
  return "i" + std::to_string(island) + "h" + std::to_string(device / 2);
}

// Random chains and diamonds over random islands and device subsets.
RunSpec RandomRun(std::mt19937& rng, uint64_t client, uint64_t run, int islands) {
  RunSpec spec{client, run, {}};
  const int nodes = 2 + static_cast<int>(rng() % 4);
  for (int k = 0; k < nodes; ++k) {
    NodeSpec n;
    n.island = static_cast<int>(rng() % islands);
    for (int d = 0; d < kDevicesPerIsland; ++d) {
      if (rng() % 3 != 0) n.devices.push_back(d);
    }
    if (n.devices.empty()) n.devices.push_back(static_cast<int>(rng() % kDevicesPerIsland));
    n.collective = n.devices.size() > 1 && rng() % 2 == 0;
    if (k > 0) {
      if (rng() % 2 == 0) {
        n.inputs.push_back(k - 1);  // a chain
      } else {
        for (int p = 0; p < k; ++p) {
          if (rng() % 2 == 0) n.inputs.push_back(p);  // a diamond's fan-in
        }
        if (n.inputs.empty()) n.inputs.push_back(static_cast<int>(rng() % k));
      }
    }
    spec.nodes.push_back(std::move(n));
  }
  return spec;
}

// What the client library sends each island for `spec` (see client/lowering.cc); with
// `ordered` false, the cross-island edges are left out (no ordering across islands).
std::map<int, proto::SubmitProgram> Subgraphs(const RunSpec& spec, bool ordered) {
  std::map<int, proto::SubmitProgram> out;
  std::map<std::pair<int, uint32_t>, proto::CrossIslandNode> cross;
  for (size_t k = 0; k < spec.nodes.size(); ++k) {
    const NodeSpec& n = spec.nodes[k];
    proto::SubmitProgram& p = out[n.island];
    p.client_id = spec.client;
    p.run_id = spec.run;
    for (size_t s = 0; s < n.devices.size(); ++s) {
      proto::Entry e;
      e.run_id = spec.run;
      e.node = static_cast<uint32_t>(k);
      e.device = static_cast<uint32_t>(n.devices[s]);
      e.shard = static_cast<uint32_t>(s);
      e.num_shards = static_cast<uint32_t>(n.devices.size());
      e.owner_client = spec.client;
      p.entries.push_back({Executor(n.island, n.devices[s]), e});
    }
    for (int producer : n.inputs) {
      const int from = spec.nodes[producer].island;
      if (from == n.island) continue;
      auto& c = cross[{n.island, static_cast<uint32_t>(k)}];
      c.node = static_cast<uint32_t>(k);
      c.after.push_back(static_cast<uint32_t>(producer));
      auto& pr = cross[{from, static_cast<uint32_t>(producer)}];
      pr.node = static_cast<uint32_t>(producer);
      pr.announce_to.push_back(Scheduler(n.island));
    }
  }
  if (ordered) {
    for (auto& [where, c] : cross) out[where.first].cross_island.push_back(c);
  }
  return out;
}

using Message =
    std::variant<proto::SubmitProgram, proto::NodeReleased, proto::Dispatch, proto::GangDone>;

// One simulated cluster: islands' schedulers, executors' device queues, and the channels
// between them.
class Simulation {
 public:
  Simulation(std::mt19937& rng, int islands, std::vector<RunSpec> runs)
      : rng_(rng), runs_(std::move(runs)) {
    for (int i = 0; i < islands; ++i) {
      const char* policy = rng_() % 2 ? "fifo" : "share";
      orders_.emplace(Scheduler(i), IslandOrder(std::move(MakePolicy(policy).value()), rng_() % 4));
    }
    for (const RunSpec& r : runs_) {
      for (size_t k = 0; k < r.nodes.size(); ++k) specs_[{r.run, k}] = &r.nodes[k];
    }
  }

  // Clients send each run's subgraphs in submission order on their own channels.
  void Submit(bool ordered) {
    for (const RunSpec& r : runs_) {
      for (auto& [island, p] : Subgraphs(r, ordered)) {
        channels_[{"c" + std::to_string(r.client), Scheduler(island)}].push_back(p);
      }
    }
  }

  // Moves one random step at a time until nothing can move. Returns the runs that did not
  // finish (empty: every run completed).
  std::vector<uint64_t> RunToEnd() {
    for (int step = 0; step < 100000; ++step) {
      std::vector<std::pair<std::string, std::string>> ready_channels;
      for (auto& [ends, queue] : channels_) {
        if (!queue.empty()) ready_channels.push_back(ends);
      }
      std::vector<std::pair<uint64_t, uint32_t>> ready_gangs = RunnableGangs();
      const size_t choices = ready_channels.size() + ready_gangs.size();
      if (choices == 0) break;
      const size_t pick = rng_() % choices;
      if (pick < ready_channels.size()) {
        Deliver(ready_channels[pick]);
      } else {
        RunGang(ready_gangs[pick - ready_channels.size()]);
      }
    }
    std::vector<uint64_t> unfinished;
    for (const RunSpec& r : runs_) {
      for (size_t k = 0; k < r.nodes.size(); ++k) {
        if (done_[{r.run, k}] < r.nodes[k].devices.size()) {
          unfinished.push_back(r.run);
          break;
        }
      }
    }
    return unfinished;
  }

 private:
  struct Shard {
    proto::Entry entry;
    std::string scheduler;
  };
  using Device = std::pair<std::string, uint32_t>;  // executor, local device

  void Deliver(const std::pair<std::string, std::string>& ends) {
    Message m = std::move(channels_[ends].front());
    channels_[ends].pop_front();
    const std::string& to = ends.second;
    if (auto* p = std::get_if<proto::SubmitProgram>(&m)) {
      ASSERT_THAT(orders_.at(to).Submit(std::move(*p)), IsOk());
    } else if (auto* n = std::get_if<proto::NodeReleased>(&m)) {
      orders_.at(to).OnPeerReleased(n->run_id, n->node);
    } else if (auto* d = std::get_if<proto::Dispatch>(&m)) {
      for (auto& e : d->entries) {
        const uint32_t device = e.device % 2;
        queues_[{to, device}].push_back({std::move(e), ends.first});
      }
      return;
    } else if (auto* g = std::get_if<proto::GangDone>(&m)) {
      orders_.at(to).OnGangDone(ends.first, *g);
    }
    Flush(to);
  }

  // Sends what island `scheduler` releases now: dispatches and notices.
  void Flush(const std::string& scheduler) {
    IslandOrder& order = orders_.at(scheduler);
    for (auto& [executor, dispatch] : order.Release()) {
      channels_[{scheduler, executor}].push_back(std::move(dispatch));
    }
    for (auto& notice : order.TakeNotices()) {
      channels_[{scheduler, notice.scheduler}].push_back(notice.released);
    }
  }

  bool InputsReady(const proto::Entry& e) {
    for (int p : specs_.at({e.run_id, e.node})->inputs) {
      if (done_[{e.run_id, p}] < specs_.at({e.run_id, p})->devices.size()) return false;
    }
    return true;
  }

  // Gangs whose shards can start now: each at the head of its device with its inputs
  // there; a collective only when all its shards are.
  std::vector<std::pair<uint64_t, uint32_t>> RunnableGangs() {
    std::map<std::pair<uint64_t, uint32_t>, size_t> heads;
    for (auto& [device, queue] : queues_) {
      if (!queue.empty() && InputsReady(queue.front().entry)) {
        heads[{queue.front().entry.run_id, queue.front().entry.node}]++;
      }
    }
    std::vector<std::pair<uint64_t, uint32_t>> ready;
    for (const auto& [gang, at_head] : heads) {
      const NodeSpec& spec = *specs_.at(gang);
      if (!spec.collective || at_head == spec.devices.size()) ready.push_back(gang);
    }
    return ready;
  }

  // Runs every shard of `gang` at the head of its device, as their executors would, and
  // reports them done.
  void RunGang(const std::pair<uint64_t, uint32_t>& gang) {
    for (auto& [device, queue] : queues_) {
      if (queue.empty() || queue.front().entry.run_id != gang.first ||
          queue.front().entry.node != gang.second) {
        continue;
      }
      Shard shard = std::move(queue.front());
      queue.pop_front();
      done_[gang]++;
      proto::GangDone report;
      report.gang_seq = shard.entry.gang_seq;
      report.shards = 1;
      channels_[{device.first, shard.scheduler}].push_back(report);
    }
  }

  std::mt19937& rng_;
  std::vector<RunSpec> runs_;
  std::map<std::pair<uint64_t, size_t>, const NodeSpec*> specs_;
  std::map<std::string, IslandOrder> orders_;
  std::map<std::pair<std::string, std::string>, std::deque<Message>> channels_;
  std::map<Device, std::deque<Shard>> queues_;
  std::map<std::pair<uint64_t, size_t>, size_t> done_;  // shards finished per node
};

// How many of `cases` random cases end with a run that never finished.
int CountStuckCases(bool ordered, int cases, uint32_t seed) {
  std::mt19937 rng(seed);
  int stuck = 0;
  for (int c = 0; c < cases; ++c) {
    const int islands = 2 + static_cast<int>(rng() % 3);
    const int clients = 2 + static_cast<int>(rng() % 3);
    std::vector<RunSpec> runs;
    uint64_t run = 1;
    for (int client = 1; client <= clients; ++client) {
      const int count = 1 + static_cast<int>(rng() % 3);
      for (int r = 0; r < count; ++r) runs.push_back(RandomRun(rng, client, run++, islands));
    }
    Simulation sim(rng, islands, std::move(runs));
    sim.Submit(ordered);
    const std::vector<uint64_t> unfinished = sim.RunToEnd();
    if (::testing::Test::HasFatalFailure()) return -1;
    if (!unfinished.empty()) {
      ++stuck;
      if (ordered) ADD_FAILURE() << "case " << c << ": " << unfinished.size() << " runs stuck";
    }
  }
  return stuck;
}

TEST(CrossIslandPropertyTest, EveryRunCompletesWhateverTheInterleaving) {
  EXPECT_EQ(CountStuckCases(/*ordered=*/true, 3000, 20261124), 0);
}

// The simulation can tell: without the cross-island edges, the same kind of load wedges.
TEST(CrossIslandPropertyTest, WithoutTheCrossIslandRuleSomeCasesWedge) {
  EXPECT_GT(CountStuckCases(/*ordered=*/false, 3000, 20261124), 0);
}

}  // namespace
}  // namespace atl::scheduler
