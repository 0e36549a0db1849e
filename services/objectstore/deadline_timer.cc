#include "services/objectstore/deadline_timer.h"

#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

namespace atl::store {

namespace {

void SetTime(int fd, const itimerspec& spec, int flags) {
  // Cannot fail for a valid fd and a normalised time; nothing useful to do if it did.
  [[maybe_unused]] const int rc = timerfd_settime(fd, flags, &spec, nullptr);
}

}  // namespace

Result<DeadlineTimer> DeadlineTimer::Create() {
  const int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return Unavailable(std::string("cannot create a timerfd: ") + std::strerror(err));
  }
  return DeadlineTimer(fd);
}

DeadlineTimer::DeadlineTimer(DeadlineTimer&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

DeadlineTimer& DeadlineTimer::operator=(DeadlineTimer&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

DeadlineTimer::~DeadlineTimer() {
  if (fd_ >= 0) close(fd_);
}

void DeadlineTimer::ArmAt(TimePoint when) {
  // std::chrono::steady_clock is CLOCK_MONOTONIC on Linux, so its epoch is the timerfd's.
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch()).count();
  if (ns <= 0) ns = 1;  // 0 would disarm
  itimerspec spec{};
  spec.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  spec.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  SetTime(fd_, spec, TFD_TIMER_ABSTIME);
}

void DeadlineTimer::Clear() { SetTime(fd_, itimerspec{}, 0); }

void DeadlineTimer::Drain() {
  uint64_t expirations = 0;
  [[maybe_unused]] const ssize_t n = read(fd_, &expirations, sizeof(expirations));
}

}  // namespace atl::store
