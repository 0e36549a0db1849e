#include "services/executor/tuple_outbox.h"

#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace atl::executor {

TupleOutbox::TupleOutbox(zmq::context_t& context, const DataPlaneConfig& config)
    : config_(config), window_(config.batch_window_us), peers_(context) {}

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
    if (batch.message.tuples.empty() || !Due(batch, now)) continue;
    const uint64_t tuples = batch.message.tuples.size();
    net::Frames frames = batch.frames.Take();
    Status sent = [&]() -> Status {
      ATOLL_ASSIGN_OR_RETURN(zmq::socket_t * peer, peers_.Get(endpoint));
      return net::Send(*peer, nullptr, 0, batch.message, std::move(frames));
    }();
    if (sent.ok()) {
      stats_.tuples += tuples;
      stats_.batches++;
      stats_.bytes += batch.bytes;
    } else {
      errors.push_back(
          sent.WithContext("send " + std::to_string(tuples) + " tuples to " + endpoint));
    }
    batch.message.tuples.clear();
    batch.bytes = 0;
    batch.urgent = false;
  }
  ArmTimer(now);
  return errors;
}

void TupleOutbox::ArmTimer(std::chrono::steady_clock::time_point now) {
  auto next = kDisarmed;
  for (const auto& [endpoint, batch] : batches_) {
    if (!batch.message.tuples.empty()) next = std::min(next, batch.first + window_);
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
