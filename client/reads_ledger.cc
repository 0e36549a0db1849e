#include "client/reads_ledger.h"

#include <iterator>
#include <utility>

namespace atl {

void ReadsLedger::Hold(uint64_t run, const std::set<std::string>& schedulers,
                       std::vector<KeepAlive> reads) {
  if (schedulers.empty() || reads.empty()) return;
  Held& held = runs_[run];
  for (const auto& scheduler : schedulers) {
    if (held.schedulers.insert(scheduler).second) awaited_[scheduler]++;
  }
  held.reads.insert(held.reads.end(), std::make_move_iterator(reads.begin()),
                    std::make_move_iterator(reads.end()));
}

std::vector<ReadsLedger::KeepAlive> ReadsLedger::Done(const std::string& scheduler, uint64_t run) {
  auto it = runs_.find(run);
  if (it == runs_.end() || it->second.schedulers.erase(scheduler) == 0) return {};
  if (--awaited_[scheduler] == 0) awaited_.erase(scheduler);
  if (!it->second.schedulers.empty()) return {};
  std::vector<KeepAlive> released = std::move(it->second.reads);
  runs_.erase(it);
  return released;
}

std::vector<ReadsLedger::KeepAlive> ReadsLedger::Lost(const std::string& scheduler) {
  std::vector<uint64_t> waiting;
  for (const auto& [run, held] : runs_) {
    if (held.schedulers.count(scheduler)) waiting.push_back(run);
  }
  std::vector<KeepAlive> released;
  for (uint64_t run : waiting) {
    for (auto& read : Done(scheduler, run)) released.push_back(std::move(read));
  }
  return released;
}

std::vector<ReadsLedger::KeepAlive> ReadsLedger::TakeAll() {
  std::vector<KeepAlive> all;
  for (auto& [run, held] : runs_) {
    all.insert(all.end(), std::make_move_iterator(held.reads.begin()),
               std::make_move_iterator(held.reads.end()));
  }
  runs_.clear();
  awaited_.clear();
  return all;
}

}  // namespace atl
