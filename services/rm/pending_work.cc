#include "services/rm/pending_work.h"

#include <utility>

namespace atl::rm {

namespace {

// Counts one answer to `id` in `pending`; returns the record when it finished.
template <typename Record>
std::optional<Record> CountAnswer(std::map<uint64_t, Record>& pending, uint64_t id, bool failed) {
  auto it = pending.find(id);
  if (it == pending.end()) return std::nullopt;
  if (!failed && --it->second.acks_missing > 0) return std::nullopt;
  Record done = std::move(it->second);
  pending.erase(it);
  return done;
}

// Takes the records of `pending` whose deadline passed at `now`.
template <typename Record>
std::vector<Record> TakeExpired(std::map<uint64_t, Record>& pending,
                                PendingWork::Clock::time_point now) {
  std::vector<Record> expired;
  for (auto it = pending.begin(); it != pending.end();) {
    if (now > it->second.deadline) {
      expired.push_back(std::move(it->second));
      it = pending.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

}  // namespace

void PendingWork::AddRegistration(uint64_t id, std::string client_routing_id,
                                  uint64_t client_request_id, uint64_t function_id, size_t acks,
                                  Clock::time_point now) {
  registrations_[id] = {std::move(client_routing_id), client_request_id, function_id, acks,
                        now + compile_timeout_};
}

std::optional<PendingWork::Remap> PendingWork::AddRemap(uint64_t id, uint64_t slice,
                                                        std::string reason, size_t acks,
                                                        uint64_t drain, Clock::time_point now) {
  Remap remap{slice, std::move(reason), acks, now + compile_timeout_, drain};
  if (acks == 0) return remap;
  remaps_[id] = std::move(remap);
  return std::nullopt;
}

std::optional<PendingWork::Registration> PendingWork::RegistrationAnswered(uint64_t id,
                                                                           bool failed) {
  return CountAnswer(registrations_, id, failed);
}

std::optional<PendingWork::Remap> PendingWork::RemapAnswered(uint64_t id, bool failed) {
  return CountAnswer(remaps_, id, failed);
}

std::vector<PendingWork::Registration> PendingWork::ExpiredRegistrations(Clock::time_point now) {
  return TakeExpired(registrations_, now);
}

std::vector<PendingWork::Remap> PendingWork::ExpiredRemaps(Clock::time_point now) {
  return TakeExpired(remaps_, now);
}

uint64_t PendingWork::StartDrain(std::string routing_id, uint64_t request_id) {
  const uint64_t id = NewRequestId();
  drains_[id] = {std::move(routing_id), request_id, 1, {}};
  return id;
}

void PendingWork::DrainMoved(uint64_t drain, uint64_t slice) {
  Drain& d = drains_.at(drain);
  d.reply.moved.push_back(slice);
  d.steps_missing++;
}

void PendingWork::DrainKept(uint64_t drain, uint64_t slice) {
  drains_.at(drain).reply.kept.push_back(slice);
}

std::optional<PendingWork::Drain> PendingWork::DrainStepDone(uint64_t drain) {
  auto it = drains_.find(drain);
  if (it == drains_.end() || --it->second.steps_missing > 0) return std::nullopt;
  Drain done = std::move(it->second);
  drains_.erase(it);
  return done;
}

}  // namespace atl::rm
