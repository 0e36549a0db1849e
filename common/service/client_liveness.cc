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
  std::vector<uint64_t> silent = Silent(now);
  for (uint64_t id : silent) last_heard_.erase(id);
  return silent;
}

}  // namespace atl
