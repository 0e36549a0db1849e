#include "client/service_losses.h"

#include <fmt/format.h>

namespace atl {

void ServicesNeeded::Add(const ServicesNeeded& more) {
  schedulers.insert(more.schedulers.begin(), more.schedulers.end());
  stores.insert(more.stores.begin(), more.stores.end());
  hosts.insert(more.hosts.begin(), more.hosts.end());
}

bool ServicesNeeded::Needs(const Loss& loss) const {
  switch (loss.role) {
    case proto::Heartbeat::kScheduler:
      return schedulers.count(loss.endpoint) > 0;
    case proto::Heartbeat::kStore:
      return stores.count(loss.endpoint) > 0;
    case proto::Heartbeat::kExecutor:
      return hosts.count(loss.name) > 0;
    default:
      return false;
  }
}

const Loss* ServiceLosses::Notice(const proto::ServiceChanged& changed) {
  auto key = std::make_pair(changed.role, changed.name);
  if (!changed.lost) {
    down_.erase(key);
    return nullptr;
  }
  const Loss& loss = Lose({changed.role, changed.name, changed.endpoint, changed.reason});
  down_[std::move(key)] = loss;
  return &loss;
}

const Loss& ServiceLosses::Lose(Loss loss) {
  losses_.push_back(std::move(loss));
  return losses_.back();
}

Loss ServiceLosses::DroppedConnection(uint8_t role, std::string name, std::string endpoint,
                                      const std::string& who) {
  return {role, std::move(name), std::move(endpoint),
          who +
              " was lost: its connection dropped (it died or restarted, or the network "
              "failed)"};
}

bool ServiceLosses::Dropped(const std::string& endpoint, uint64_t drops) {
  return std::exchange(connection_drops_[endpoint], drops) != drops;
}

bool ServiceLosses::StoresDue(std::chrono::steady_clock::time_point now) {
  if (now - stores_watched_ < notice_period) return false;
  stores_watched_ = now;
  return true;
}

const Loss* ServiceLosses::LossFor(const ServicesNeeded& needs, size_t seen) const {
  for (size_t i = seen; i < losses_.size(); ++i) {
    if (needs.Needs(losses_[i])) return &losses_[i];
  }
  return nullptr;
}

Status ServiceLosses::CheckUp(uint64_t run, const ServicesNeeded& needs) const {
  for (const auto& [key, loss] : down_) {
    if (needs.Needs(loss)) return Unavailable(fmt::format("run {}: {}", run, loss.reason));
  }
  return Status::Ok();
}

}  // namespace atl
