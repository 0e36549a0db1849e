#include "common/service/client_liveness.h"

namespace atl {

void ClientLiveness::Heard(uint64_t id, Clock::time_point now) { last_heard_[id] = now; }

void ClientLiveness::HeardAll(Clock::time_point now) {
  for (auto& [id, heard] : last_heard_) heard = now;
}

void ClientLiveness::Forget(uint64_t id) { last_heard_.erase(id); }

std::vector<uint64_t> ClientLiveness::Silent(Clock::time_point now) const {
  std::vector<uint64_t> silent;
  for (const auto& [id, heard] : last_heard_) {
    if (now - heard > lapse_) silent.push_back(id);
  }
  return silent;
}

std::vector<uint64_t> ClientLiveness::TakeSilent(Clock::time_point now) {
  if (table_late_ != Clock::duration::max() && now - table_heard_ > table_late_) {
    HeardAll(now);
    return {};
  }
  std::vector<uint64_t> silent = Silent(now);
  for (uint64_t id : silent) last_heard_.erase(id);
  return silent;
}

void ClientLiveness::FollowTable(Clock::duration late, Clock::time_point now) {
  table_late_ = late;
  table_heard_ = now;
}

void ClientLiveness::TableHeard(const std::vector<uint64_t>& alive, Clock::time_point now) {
  // The first table after a late one: every client gets the full lapse from it, as from a
  // restart of the RM.
  if (now - table_heard_ > table_late_) HeardAll(now);
  table_heard_ = now;
  for (uint64_t id : alive) {
    if (auto it = last_heard_.find(id); it != last_heard_.end()) it->second = now;
  }
}

}  // namespace atl
