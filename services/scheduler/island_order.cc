#include "services/scheduler/island_order.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

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
                           {}});
    }
    run.gangs.back().shards.push_back(std::move(placed));
  }
  ClientQueue& queue = clients_[program.client_id];
  queue.weight = program.weight;
  queue.runs.push_back(std::move(run));
  return Status::Ok();
}

const IslandOrder::Gang* IslandOrder::Head(const ClientQueue& queue) const {
  if (queue.runs.empty()) return nullptr;
  const Run& run = queue.runs.front();
  const Gang& gang = run.gangs.front();
  if (gang.sequential) {
    auto it = run_in_flight_.find(run.run_id);
    if (it != run_in_flight_.end() && it->second > 0) return nullptr;
  }
  return &gang;
}

double IslandOrder::ExpectedCost(uint64_t function_id) const {
  auto it = cost_us_.find(function_id);
  return it == cost_us_.end() ? 1.0 : it->second;
}

std::map<std::string, proto::Dispatch> IslandOrder::Release() {
  std::map<std::string, proto::Dispatch> out;
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
    Run& run = queue.runs.front();
    Gang gang = std::move(run.gangs.front());
    run.gangs.pop_front();
    const uint64_t seq = next_seq_++;
    policy_->Charge(client, queue.weight, ExpectedCost(gang.function_id));
    in_flight_[seq] = {client, run.run_id, gang.function_id, gang.shards.size(), 0};
    run_in_flight_[run.run_id]++;
    for (auto& placed : gang.shards) {
      placed.entry.gang_seq = seq;
      out[placed.executor].entries.push_back(std::move(placed.entry));
    }
    if (run.gangs.empty()) queue.runs.pop_front();
    if (queue.runs.empty()) clients_.erase(client);
  }
  return out;
}

void IslandOrder::OnGangDone(const proto::GangDone& done) {
  auto it = in_flight_.find(done.gang_seq);
  if (it == in_flight_.end()) return;  // a duplicate or a gang from before a restart
  Flight& f = it->second;
  f.busy_us = std::max(f.busy_us, done.busy_us);
  f.shards_left -= std::min<size_t>(f.shards_left, done.shards);
  if (f.shards_left > 0) return;
  double& cost = cost_us_.try_emplace(f.function_id, static_cast<double>(f.busy_us)).first->second;
  cost += kCostSmoothing * (static_cast<double>(f.busy_us) - cost);
  if (--run_in_flight_[f.run] == 0) run_in_flight_.erase(f.run);
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
