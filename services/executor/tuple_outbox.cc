#include "services/executor/tuple_outbox.h"

#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/net/try_send.h"

namespace atl::executor {

namespace {

// How soon a held batch is tried again: a quarter of how long it has been held, within
// these bounds, so that a peer back at once costs little delay and one gone for long
// little CPU.
constexpr std::chrono::milliseconds kFirstRetry{1};
constexpr std::chrono::milliseconds kLastRetry{100};

constexpr proto::Kind kBatch = proto::TupleBatch::kKind;

}  // namespace

TupleOutbox::TupleOutbox(zmq::context_t& context, const DataPlaneConfig& config,
                         std::chrono::milliseconds hold_limit)
    : config_(config), window_(config.batch_window_us), hold_limit_(hold_limit), peers_(context) {}

TupleOutbox::~TupleOutbox() {
  if (timer_fd_ >= 0) close(timer_fd_);
}

Status TupleOutbox::Start() {
  timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timer_fd_ < 0) return Internal(std::string("timerfd_create: ") + std::strerror(errno));
  return Status::Ok();
}

void TupleOutbox::Add(const std::string& endpoint, proto::TupleHeader h, Result<Tensor> value,
                      bool urgent) {
  Batch& batch = batches_[endpoint];
  if (batch.message.tuples.empty()) batch.first = std::chrono::steady_clock::now();
  batch.urgent = batch.urgent || urgent;
  batch.bytes += batch.frames.Add(h, std::move(value));
  batch.message.tuples.push_back(std::move(h));
}

bool TupleOutbox::Due(const Batch& batch, std::chrono::steady_clock::time_point now) const {
  return batch.urgent || window_.count() == 0 || batch.bytes >= config_.batch_bytes ||
         now - batch.first >= window_;
}

std::vector<Status> TupleOutbox::Flush() {
  std::vector<Status> errors;
  const auto now = std::chrono::steady_clock::now();
  for (auto& [endpoint, batch] : batches_) {
    const bool due = !batch.message.tuples.empty() && Due(batch, now);
    if (due || !batch.held.empty()) Send(endpoint, batch, due, now, errors);
  }
  ArmTimer(now);
  return errors;
}

uint64_t TupleOutbox::PeerLost(const std::string& endpoint) {
  auto it = batches_.find(endpoint);
  if (it == batches_.end()) return 0;
  uint64_t tuples = it->second.message.tuples.size();
  for (const Held& message : it->second.held) tuples += message.tuples;
  batches_.erase(it);
  ArmTimer(std::chrono::steady_clock::now());
  return tuples;
}

void TupleOutbox::Send(const std::string& endpoint, Batch& batch, bool due,
                       std::chrono::steady_clock::time_point now, std::vector<Status>& errors) {
  auto dropped = [&](uint64_t tuples, const Status& why) {
    errors.push_back(why.WithContext("send " + std::to_string(tuples) + " tuples to " + endpoint));
  };
  Result<zmq::socket_t*> peer = peers_.Get(endpoint);
  if (!peer.ok()) {  // not an endpoint: nothing for it was ever sent, or held
    if (due) dropped(Encode(batch).tuples, peer.status());
    return;
  }
  // Oldest first: a batch never overtakes one held before it.
  bool took = false;
  while (!batch.held.empty()) {
    Result<bool> went = net::TrySend(**peer, batch.held.front().frames, kBatch);
    if (went.ok() && !*went) break;
    if (went.ok()) {
      CountSent(batch.held.front());
      took = true;
    } else {
      dropped(batch.held.front().tuples, went.status());
    }
    batch.held.pop_front();
  }
  if (due) {
    Held next = Encode(batch);
    Result<bool> went = batch.held.empty() ? net::TrySend(**peer, next.frames, kBatch) : false;
    if (!went.ok()) {
      dropped(next.tuples, went.status());
    } else if (*went) {
      CountSent(next);
    } else {
      batch.held.push_back(std::move(next));
    }
  }
  if (batch.held.empty()) {
    batch.held_since = kNever;
    return;
  }
  if (took || batch.held_since == kNever) batch.held_since = now;
  if (now - batch.held_since < hold_limit_) return;
  uint64_t tuples = 0;
  for (const Held& message : batch.held) tuples += message.tuples;
  dropped(tuples, Unavailable(fmt::format("the peer took nothing for {} ms (its queue is full)",
                                          hold_limit_.count())));
  batch.held.clear();
  batch.held_since = kNever;
}

TupleOutbox::Held TupleOutbox::Encode(Batch& batch) {
  Held message;
  message.tuples = batch.message.tuples.size();
  message.bytes = batch.bytes;
  message.frames.push_back(proto::EncodeHeader(0, batch.message));
  for (auto& frame : batch.frames.Take()) message.frames.push_back(std::move(frame));
  batch.message.tuples.clear();
  batch.bytes = 0;
  batch.urgent = false;
  return message;
}

void TupleOutbox::CountSent(const Held& message) {
  stats_.tuples += message.tuples;
  stats_.batches++;
  stats_.bytes += message.bytes;
}

size_t TupleOutbox::held() const {
  size_t n = 0;
  for (const auto& [endpoint, batch] : batches_) n += batch.held.size();
  return n;
}

std::chrono::steady_clock::time_point TupleOutbox::NextLook(
    const Batch& batch, std::chrono::steady_clock::time_point now) const {
  if (batch.held.empty()) return batch.first + window_;
  const auto retry = std::clamp<std::chrono::steady_clock::duration>((now - batch.held_since) / 4,
                                                                     kFirstRetry, kLastRetry);
  return now + retry;
}

void TupleOutbox::ArmTimer(std::chrono::steady_clock::time_point now) {
  auto next = kDisarmed;
  for (const auto& [endpoint, batch] : batches_) {
    if (!batch.message.tuples.empty() || !batch.held.empty()) {
      next = std::min(next, NextLook(batch, now));
    }
  }
  if (timer_fd_ < 0 || next == armed_for_) return;  // most turns: nothing pending, as before
  armed_for_ = next;
  // Drain an expiry that already fired, so that the fd is readable only for the new one.
  uint64_t expirations = 0;
  [[maybe_unused]] auto n = read(timer_fd_, &expirations, sizeof(expirations));
  itimerspec spec{};  // all zero: disarmed
  if (next != kDisarmed) {
    // At least 1 ns: a zero it_value would disarm the timer instead of firing it.
    const int64_t ns = std::max<int64_t>(std::chrono::nanoseconds(next - now).count(), 1);
    spec.it_value.tv_sec = ns / 1'000'000'000;
    spec.it_value.tv_nsec = ns % 1'000'000'000;
  }
  timerfd_settime(timer_fd_, 0, &spec, nullptr);
}

}  // namespace atl::executor
