#include "services/scheduler/island_order.h"

#include <algorithm>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace atl::scheduler {

namespace {

// How much a new measurement moves a function's expected cost.
constexpr double kCostSmoothing = 0.2;

Status CheckSubgraph(const proto::SubmitProgram& program) {
  if (program.entries.empty()) return InvalidArgument("program has no entries");
  if (!(program.weight > 0)) return InvalidArgument("a client's weight must be > 0");
  std::set<uint32_t> finished_nodes;
  std::set<uint32_t> shards_seen;
  for (size_t i = 0; i < program.entries.size(); ++i) {
    const auto& e = program.entries[i].entry;
    if (program.entries[i].executor.empty()) {
      return InvalidArgument(fmt::format("entry {} names no executor", i));
    }
    if (e.run_id != program.run_id) {
      return InvalidArgument(
          fmt::format("entry {} belongs to run {}, not {}", i, e.run_id, program.run_id));
    }
    if (e.num_shards == 0 || e.shard >= e.num_shards) {
      return InvalidArgument(fmt::format("entry {}: shard {} of {}", i, e.shard, e.num_shards));
    }
    const bool new_node = i == 0 || program.entries[i - 1].entry.node != e.node;
    if (new_node) {
      if (i > 0) finished_nodes.insert(program.entries[i - 1].entry.node);
      if (finished_nodes.count(e.node)) {
        return InvalidArgument(fmt::format("node {}'s shards are not listed together", e.node));
      }
      shards_seen.clear();
    } else if (e.num_shards != program.entries[i - 1].entry.num_shards) {
      return InvalidArgument(fmt::format("node {}'s shards disagree on the shard count", e.node));
    }
    if (!shards_seen.insert(e.shard).second) {
      return InvalidArgument(fmt::format("node {} lists shard {} twice", e.node, e.shard));
    }
  }
  return Status::Ok();
}

}  // namespace

IslandOrder::IslandOrder(std::unique_ptr<SchedulingPolicy> policy, size_t window)
    : policy_(std::move(policy)), window_(window) {}

Status IslandOrder::Submit(proto::SubmitProgram program) {
  ATOLL_RETURN_IF_ERROR(CheckSubgraph(program));
  Run run{program.run_id, {}};
  for (auto& placed : program.entries) {
    if (run.gangs.empty() || run.gangs.back().node != placed.entry.node) {
      run.gangs.push_back({placed.entry.node,
                           placed.entry.function_id,
                           placed.entry.sequential,
                           next_arrival_++,
                           {},
                           {},
                           {},
                           -1});
    }
    run.gangs.back().shards.push_back(std::move(placed));
  }
  for (auto& cross : program.cross_island) {
    auto gang = std::find_if(run.gangs.begin(), run.gangs.end(),
                             [&](const Gang& g) { return g.node == cross.node; });
    if (gang == run.gangs.end()) {
      return InvalidArgument(
          fmt::format("cross-island node {} has no entries on this island", cross.node));
    }
    gang->after = std::move(cross.after);
    gang->announce_to = std::move(cross.announce_to);
  }
  Unfinished& unfinished = unfinished_[program.run_id];
  if (unfinished.gangs == 0) {  // a new run here
    unfinished.client = program.client_id;
    unfinished_runs_[program.client_id]++;
  }
  unfinished.gangs += run.gangs.size();
  unfinished.notify_done = unfinished.notify_done || program.notify_done;
  ClientQueue& queue = clients_[program.client_id];
  queue.weight = program.weight;
  queue.runs.push_back(std::move(run));
  if (Status lost = NeedsLostExecutor(queue.runs.back()); !lost.ok()) {
    // Refused the same way as the runs queued when the executor was lost: its gangs on live
    // executors fail there, so that the client hears why from its results.
    FailRun(program.client_id, queue, std::prev(queue.runs.end()), lost);
    if (queue.runs.empty()) clients_.erase(program.client_id);
  }
  return Status::Ok();
}

std::vector<uint32_t> IslandOrder::Missing(uint64_t run, const Gang& gang) const {
  std::vector<uint32_t> missing;
  if (gang.after.empty()) return missing;
  auto released = released_elsewhere_.find(run);
  for (uint32_t node : gang.after) {
    if (released == released_elsewhere_.end() || !released->second.nodes.count(node)) {
      missing.push_back(node);
    }
  }
  return missing;
}

const IslandOrder::Gang* IslandOrder::Head(const ClientQueue& queue) const {
  if (queue.runs.empty()) return nullptr;
  const Run& run = queue.runs.front();
  const Gang& gang = run.gangs.front();
  if (gang.sequential) {
    auto it = run_in_flight_.find(run.run_id);
    if (it != run_in_flight_.end() && it->second > 0) return nullptr;
  }
  if (!Missing(run.run_id, gang).empty()) return nullptr;
  return &gang;
}

double IslandOrder::ExpectedCost(uint64_t function_id) const {
  auto it = cost_us_.find(function_id);
  return it == cost_us_.end() ? 1.0 : it->second;
}

std::map<std::string, proto::Dispatch> IslandOrder::Release() {
  std::vector<Candidate> candidates;
  while (window_ == 0 || in_flight_.size() < window_) {
    candidates.clear();
    for (const auto& [client, queue] : clients_) {
      if (const Gang* head = Head(queue))
        candidates.push_back({client, queue.weight, head->arrival});
    }
    if (candidates.empty()) break;
    const uint64_t client = policy_->Pick(candidates);
    ClientQueue& queue = clients_.at(client);
    PlaceFront(client, queue, Status::Ok());
    if (queue.runs.empty()) clients_.erase(client);
  }
  return std::exchange(placed_, {});
}

void IslandOrder::PlaceFront(uint64_t client, ClientQueue& queue, const Status& failure) {
  Place(client, queue, queue.runs.begin(), failure);
}

std::deque<IslandOrder::Run>::iterator IslandOrder::Place(uint64_t client, ClientQueue& queue,
                                                          std::deque<Run>::iterator run_it,
                                                          const Status& failure) {
  Run& run = *run_it;
  Gang gang = std::move(run.gangs.front());
  run.gangs.pop_front();
  const uint64_t seq = next_seq_++;
  policy_->Charge(client, queue.weight, ExpectedCost(gang.function_id));
  Flight& flight = in_flight_[seq];
  flight = {client, run.run_id, gang.function_id, {}, 0};
  for (auto& placed : gang.shards) {
    // A lost executor would never run nor report the shard: it is not sent.
    if (lost_executors_.count(placed.executor)) continue;
    placed.entry.gang_seq = seq;
    if (!failure.ok()) {
      placed.entry.error_code = static_cast<int32_t>(failure.code());
      placed.entry.error = failure.message();
    }
    flight.shards_left[placed.executor]++;
    placed_[placed.executor].entries.push_back(std::move(placed.entry));
  }
  run_in_flight_[run.run_id]++;
  if (flight.shards_left.empty()) Land(in_flight_.find(seq));  // every shard's host is lost
  // A failed gang is announced too: it waits for nothing, and its consumers elsewhere
  // then fail on its error instead of waiting for its place.
  for (auto& scheduler : gang.announce_to) {
    notices_.push_back({std::move(scheduler), {run.run_id, gang.node}});
  }
  if (!run.gangs.empty()) return run_it;
  released_elsewhere_.erase(run.run_id);  // every node here that needed them is placed
  return queue.runs.erase(run_it);
}

std::deque<IslandOrder::Run>::iterator IslandOrder::FailRun(uint64_t client, ClientQueue& queue,
                                                            std::deque<Run>::iterator run,
                                                            const Status& why) {
  const uint64_t id = run->run_id;
  while (run != queue.runs.end() && run->run_id == id) run = Place(client, queue, run, why);
  return run;
}

Status IslandOrder::NeedsLostExecutor(const Run& run) const {
  for (const Gang& gang : run.gangs) {
    for (const auto& placed : gang.shards) {
      if (auto lost = lost_executors_.find(placed.executor); lost != lost_executors_.end()) {
        return lost->second;
      }
    }
  }
  return Status::Ok();
}

std::vector<uint64_t> IslandOrder::ExecutorLost(const std::string& executor, const Status& why) {
  lost_executors_.insert_or_assign(executor, why);
  // Its shards in flight will never report: counted done, so that the window moves on.
  // Their runs failed (their outputs are gone with it); those with gangs left stop.
  std::set<uint64_t> failed;
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    auto next = std::next(it);
    if (it->second.shards_left.erase(executor)) {
      failed.insert(it->second.run);
      if (it->second.shards_left.empty()) Land(it);
    }
    it = next;
  }
  std::erase_if(failed, [&](uint64_t run) { return !unfinished_.count(run); });
  for (auto client = clients_.begin(); client != clients_.end();) {
    ClientQueue& queue = client->second;
    for (auto run = queue.runs.begin(); run != queue.runs.end();) {
      if (NeedsLostExecutor(*run).ok()) {
        ++run;
        continue;
      }
      failed.insert(run->run_id);
      run = FailRun(client->first, queue, run, why);
    }
    client = queue.runs.empty() ? clients_.erase(client) : std::next(client);
  }
  // Stopped here, by the caller: their shards failing for it are not news (OnGangDone).
  for (uint64_t run : failed) {
    if (auto u = unfinished_.find(run); u != unfinished_.end()) u->second.failed = true;
  }
  return {failed.begin(), failed.end()};
}

void IslandOrder::ExecutorBack(const std::string& executor) { lost_executors_.erase(executor); }

void IslandOrder::OnPeerReleased(uint64_t run, uint32_t node) {
  released_elsewhere_[run].nodes.insert(node);
}

std::vector<IslandOrder::Notice> IslandOrder::TakeNotices() { return std::exchange(notices_, {}); }

size_t IslandOrder::DropClient(uint64_t client, const Status& why) {
  for (auto& [run, unfinished] : unfinished_) {
    if (unfinished.client == client) unfinished.cancelled = true;
  }
  auto it = clients_.find(client);
  if (it == clients_.end()) return 0;
  ClientQueue& queue = it->second;
  const size_t runs = queue.runs.size();
  while (!queue.runs.empty()) PlaceFront(client, queue, why);
  clients_.erase(it);
  return runs;
}

std::vector<uint64_t> IslandOrder::UnfinishedRuns(uint64_t client) const {
  std::vector<uint64_t> runs;
  for (const auto& [run, unfinished] : unfinished_) {
    if (unfinished.client == client) runs.push_back(run);
  }
  return runs;
}

size_t IslandOrder::UnfinishedRunCount(uint64_t client) const {
  auto it = unfinished_runs_.find(client);
  return it == unfinished_runs_.end() ? 0 : it->second;
}

bool IslandOrder::CancelRun(uint64_t client, uint64_t run, const Status& why) {
  auto unfinished = unfinished_.find(run);
  if (unfinished == unfinished_.end() || unfinished->second.client != client) return false;
  unfinished->second.cancelled = true;
  auto queue = clients_.find(client);
  if (queue == clients_.end()) return true;  // all of it is in flight
  auto& runs = queue->second.runs;
  auto it = std::find_if(runs.begin(), runs.end(), [&](const Run& r) { return r.run_id == run; });
  // Placed out of turn, ahead of the client's earlier runs: a failed gang waits for
  // nothing and runs nothing, so it holds back no one queued behind it on a device.
  if (it != runs.end()) FailRun(client, queue->second, it, why);
  if (runs.empty()) clients_.erase(queue);
  return true;
}

std::vector<IslandOrder::FinishedRun> IslandOrder::TakeFinishedRuns() {
  return std::exchange(finished_, {});
}

std::vector<IslandOrder::Expired> IslandOrder::Expire(int64_t now_us, int64_t held_us) {
  auto too_old = [&](int64_t& since) {
    if (since < 0) since = now_us;
    return now_us - since > held_us;
  };
  std::vector<Expired> expired;
  std::set<uint64_t> queued;
  for (auto& [client, queue] : clients_) {
    for (const Run& run : queue.runs) queued.insert(run.run_id);
    // Only a client's front run can be held: its later runs wait behind it.
    Gang& head = queue.runs.front().gangs.front();
    std::vector<uint32_t> missing = Missing(queue.runs.front().run_id, head);
    if (missing.empty()) {
      head.held_since_us = -1;
    } else if (too_old(head.held_since_us)) {
      expired.push_back({client, queue.runs.front().run_id, head.node, std::move(missing)});
    }
  }
  for (const Expired& e : expired) {
    const Status failure = DeadlineExceeded(fmt::format(
        "run {} node {} waited over {} ms for nodes {} of other islands to be scheduled", e.run,
        e.node, held_us / 1000, fmt::join(e.waiting_for, ",")));
    // The run's remaining gangs here take their places now, failed: they wait for nothing,
    // so they hold no device, and their consumers and results hear why.
    ClientQueue& queue = clients_.at(e.client);
    do {
      PlaceFront(e.client, queue, failure);
    } while (!queue.runs.empty() && queue.runs.front().run_id == e.run);
    if (queue.runs.empty()) clients_.erase(e.client);
  }
  // Notices for runs that never came here (their client died while submitting).
  for (auto it = released_elsewhere_.begin(); it != released_elsewhere_.end();) {
    const bool drop = !queued.count(it->first) && too_old(it->second.seen_us);
    it = drop ? released_elsewhere_.erase(it) : std::next(it);
  }
  return expired;
}

std::optional<IslandOrder::FailedRun> IslandOrder::OnGangDone(const std::string& executor,
                                                              const proto::GangDone& done) {
  auto it = in_flight_.find(done.gang_seq);
  if (it == in_flight_.end()) return std::nullopt;  // a duplicate or from before a restart
  Flight& f = it->second;
  // Not expected from `executor`: a duplicate, or it was counted lost meanwhile.
  auto left = f.shards_left.find(executor);
  if (left == f.shards_left.end()) return std::nullopt;
  const FailedRun of{f.client, f.run};
  // Read before Land, which may erase the run.
  const bool asked_for =
      done.error_code == static_cast<int32_t>(Code::kCancelled) && CancelledHere(of.run);
  f.busy_us = std::max(f.busy_us, done.busy_us);
  left->second -= std::min<size_t>(left->second, done.shards);
  if (left->second == 0) f.shards_left.erase(left);
  if (f.shards_left.empty()) {
    double& cost =
        cost_us_.try_emplace(f.function_id, static_cast<double>(f.busy_us)).first->second;
    cost += kCostSmoothing * (static_cast<double>(f.busy_us) - cost);
    Land(it);
  }
  if (done.error_code == 0 || asked_for) return std::nullopt;
  auto unfinished = unfinished_.find(of.run);
  // Gone: this report finished the run (a report of a finished run finds no flight).
  if (unfinished == unfinished_.end()) return FailedRun{of.client, of.run, true};
  if (unfinished->second.failed) return std::nullopt;
  unfinished->second.failed = true;
  return of;
}

bool IslandOrder::CancelledHere(uint64_t run) const {
  auto unfinished = unfinished_.find(run);
  return unfinished != unfinished_.end() && unfinished->second.cancelled;
}

void IslandOrder::Land(std::map<uint64_t, Flight>::iterator it) {
  const uint64_t run = it->second.run;
  if (--run_in_flight_[run] == 0) run_in_flight_.erase(run);
  if (auto u = unfinished_.find(run); u != unfinished_.end() && --u->second.gangs == 0) {
    finished_.push_back({u->second.client, run, u->second.notify_done});
    if (auto n = unfinished_runs_.find(u->second.client); n != unfinished_runs_.end()) {
      if (--n->second == 0) unfinished_runs_.erase(n);
    }
    unfinished_.erase(u);
  }
  in_flight_.erase(it);
}

size_t IslandOrder::queued() const {
  size_t n = 0;
  for (const auto& [client, queue] : clients_) {
    for (const auto& run : queue.runs) n += run.gangs.size();
  }
  return n;
}

}  // namespace atl::scheduler
