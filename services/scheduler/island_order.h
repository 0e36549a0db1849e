// IslandOrder: the island's single total order of gangs, and what decides when each gang
// gets its place. Submitted programs queue per client; gangs are released one by one,
// chosen by the scheduling policy, while fewer than `window` gangs are in flight (0: no
// limit). A released gang gets the next sequence number, and its shards are appended, in
// that order, to one Dispatch per executor. A run's gangs are released in program order;
// a sequential gang waits until the run has nothing in flight.
//
// Across islands: a gang fed by nodes of other islands is released only once each of those
// nodes was released on its own island (OnPeerReleased), and releasing a gang that feeds
// other islands produces a notice for their schedulers (TakeNotices). With every island
// holding to that, the islands' orders and the programs' edges together never form a
// cycle of waits (docs/design-notes.md, "One order across islands").
//
// Pure logic, no sockets: the scheduler service feeds it and sends what it releases.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/proto/protocol.h"
#include "services/scheduler/policy.h"

namespace atl::scheduler {

class IslandOrder {
 public:
  IslandOrder(std::unique_ptr<SchedulingPolicy> policy, size_t window);

  // Checks that `program` lists each node's shards together, each shard once, and queues
  // its gangs. InvalidArgument names what is wrong; nothing is queued then.
  Status Submit(proto::SubmitProgram program);
  // A run a shard of which failed.
  struct FailedRun {
    uint64_t client = 0;
    uint64_t run = 0;
    bool finished = false;  // nothing of it is left here
  };
  // Records finished shards of a gang, reported by `executor` (its control endpoint) once
  // per executor; the gang leaves the flight when all its shards did. Returns the gang's
  // run the first time a report says a shard of it failed (Cancelled too, unless the run was
  // cancelled here: a store may refuse the output of a client it takes for gone): the
  // caller tells its client, and, unless it finished, stops the rest of it (CancelRun, and
  // at its executors), whose shards could otherwise wait out a collective for the failed
  // shard's share.
  std::optional<FailedRun> OnGangDone(const std::string& executor, const proto::GangDone& done);
  // Releases every gang the policy and the window allow now. Returns, per executor
  // control endpoint, its entries in gang order.
  std::map<std::string, proto::Dispatch> Release();

  // Node `node` of run `run` was released on another island. May come before the run's
  // own submission here.
  void OnPeerReleased(uint64_t run, uint32_t node);
  // What Release did that other islands' schedulers must hear: one NodeReleased per
  // released cross-island producer and scheduler it feeds.
  struct Notice {
    std::string scheduler;
    proto::NodeReleased released;
  };
  std::vector<Notice> TakeNotices();

  // Drops every run `client` still has queued here (it said goodbye or stopped
  // heartbeating): their gangs take their places at once marked failed with `why`, like
  // Expire's, so that nothing waits for them. Returns how many runs.
  size_t DropClient(uint64_t client, const Status& why);
  // `client`'s runs not finished here (queued or in flight), in id order.
  std::vector<uint64_t> UnfinishedRuns(uint64_t client) const;
  // How many those are (what its runs_in_flight quota counts); no scan.
  size_t UnfinishedRunCount(uint64_t client) const;

  // The executor with control endpoint `executor` was lost (`why` names its host): every
  // queued run with a gang on it fails now (its gangs take their places at once with
  // `Entry::error` set, as DropClient's do, so that its consumers and results fail naming
  // the host), its shards in flight count as done, and runs submitted later that need it
  // fail the same way at once, until ExecutorBack. A lost executor is sent nothing. Returns
  // the runs failed now: those queued, and those with shards in flight on it.
  std::vector<uint64_t> ExecutorLost(const std::string& executor, const Status& why);
  void ExecutorBack(const std::string& executor);

  // Drops what is left of `client`'s run `run` here (the client cancelled it): its queued
  // gangs take their places at once marked failed with `why`, like DropClient's. Returns
  // whether the run has anything here, queued or in flight (whose executors must hear it).
  bool CancelRun(uint64_t client, uint64_t run, const Status& why);

  // A run every gang of which here left the flight (finished, failed or was dropped).
  struct FinishedRun {
    uint64_t client = 0;
    uint64_t run = 0;
    bool notify_done = false;  // its client asked to hear it (SubmitProgram::notify_done)
  };
  // The runs finished since the last call, in the order they finished.
  std::vector<FinishedRun> TakeFinishedRuns();

  // A run whose next gang here has waited longer than allowed for nodes of other islands.
  struct Expired {
    uint64_t client = 0;
    uint64_t run = 0;
    uint32_t node = 0;
    std::vector<uint32_t> waiting_for;  // the nodes of other islands not released yet
  };
  // Fails every run whose next gang has been held for other islands' nodes since a call
  // more than `held_us` before `now_us` (a lost client or scheduler never sends them):
  // their remaining gangs take their places at once with `Entry::error` set (the next
  // Release returns them), so that executors fail them and their consumers and results
  // hear why. Call it periodically; `now_us` is any steady clock in microseconds.
  std::vector<Expired> Expire(int64_t now_us, int64_t held_us);

  size_t in_flight() const { return in_flight_.size(); }
  size_t queued() const;
  const SchedulingPolicy& policy() const { return *policy_; }

 private:
  struct Gang {
    uint32_t node = 0;
    uint64_t function_id = 0;
    bool sequential = false;
    uint64_t arrival = 0;
    std::vector<proto::PlacedEntry> shards;
    std::vector<uint32_t> after;           // nodes of other islands that feed it
    std::vector<std::string> announce_to;  // schedulers of other islands it feeds
    int64_t held_since_us = -1;            // when Expire first saw it held; -1: not yet
  };
  struct Run {
    uint64_t run_id = 0;
    std::deque<Gang> gangs;
  };
  // A run's gangs here that have not left the flight yet, queued or in flight.
  struct Unfinished {
    uint64_t client = 0;
    size_t gangs = 0;
    bool notify_done = false;
    bool failed = false;  // OnGangDone returned it, or ExecutorLost failed it, already
    // CancelRun or DropClient stopped it: the Cancelled reports of its shards are asked for.
    bool cancelled = false;
  };
  struct ClientQueue {
    double weight = 1.0;
    std::deque<Run> runs;
  };
  struct Flight {
    uint64_t client = 0;
    uint64_t run = 0;
    uint64_t function_id = 0;
    std::map<std::string, size_t> shards_left;  // by executor, those with shards not done
    uint64_t busy_us = 0;                       // the longest shard's device time
  };

  // The client's next gang, if it may be released now.
  const Gang* Head(const ClientQueue& queue) const;
  // The nodes of other islands that `gang` of `run` still waits for.
  std::vector<uint32_t> Missing(uint64_t run, const Gang& gang) const;
  // Gives the front gang of `queue` the next place in the order (failed, with `failure`'s
  // message on its entries, when not OK).
  void PlaceFront(uint64_t client, ClientQueue& queue, const Status& failure);
  // The same for the front gang of `run`, one of `queue`'s runs; returns the run that
  // follows it in the queue once the placed gang was its last.
  std::deque<Run>::iterator Place(uint64_t client, ClientQueue& queue,
                                  std::deque<Run>::iterator run, const Status& failure);
  // Places every gang left of `run`, a run in `client`'s `queue`, failed with `why`, and
  // drops the run from the queue. Returns the run after it.
  std::deque<Run>::iterator FailRun(uint64_t client, ClientQueue& queue,
                                    std::deque<Run>::iterator run, const Status& why);
  // Why `run` cannot run: a gang of it has a shard on a lost executor. OK when none has.
  Status NeedsLostExecutor(const Run& run) const;
  // Whether CancelRun or DropClient stopped `run`, not finished yet.
  bool CancelledHere(uint64_t run) const;
  // Takes the gang `it` out of the flight, all its shards done.
  void Land(std::map<uint64_t, Flight>::iterator it);
  double ExpectedCost(uint64_t function_id) const;

  std::unique_ptr<SchedulingPolicy> policy_;
  const size_t window_;
  std::map<uint64_t, ClientQueue> clients_;
  std::map<uint64_t, Flight> in_flight_;       // by gang sequence number
  std::map<uint64_t, size_t> run_in_flight_;   // gangs in flight per run
  std::map<uint64_t, Unfinished> unfinished_;  // by run
  std::vector<FinishedRun> finished_;          // until TakeFinishedRuns returns them
  std::map<uint64_t, double> cost_us_;         // running mean device time per function
  // By client: how many of its runs unfinished_ holds.
  std::map<uint64_t, size_t> unfinished_runs_;
  // Nodes released on other islands, by run, until the run's last gang here is released
  // (or, for a run that never comes, until Expire gives up on it).
  struct PeerReleases {
    std::set<uint32_t> nodes;
    int64_t seen_us = -1;  // when Expire first saw them; -1: not yet
  };
  std::map<uint64_t, PeerReleases> released_elsewhere_;
  std::vector<Notice> notices_;
  std::map<std::string, proto::Dispatch> placed_;  // per executor, until Release returns it
  std::map<std::string, Status> lost_executors_;   // by control endpoint: why it is lost
  uint64_t next_seq_ = 1;
  uint64_t next_arrival_ = 1;
};

}  // namespace atl::scheduler
