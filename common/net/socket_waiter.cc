#include "common/net/socket_waiter.h"

#include <cerrno>
#include <cstring>
#include <string>

namespace atl::net {

namespace {

thread_local SocketWaiter* t_waiter = nullptr;  // the waiter open on this thread

}  // namespace

SocketWaiter::SocketWaiter() : outer_(t_waiter) { t_waiter = this; }

SocketWaiter::~SocketWaiter() {
  t_waiter = outer_;
  if (outer_ != nullptr) {
    for (const auto& [socket, drained] : drained_) outer_->drained_[socket] = drained;
  }
}

void SocketWaiter::NoteUse(void* socket, bool drained) {
  if (t_waiter != nullptr) t_waiter->drained_[socket] = drained;
}

Result<bool> SocketWaiter::Ask(void* socket) {
  int events = 0;
  size_t size = sizeof(events);
  if (zmq_getsockopt(socket, ZMQ_EVENTS, &events, &size) != 0) {
    if (zmq_errno() == ETERM) return Cancelled("context terminated");
    return Unavailable(std::string("poll failed: ") + zmq_strerror(zmq_errno()));
  }
  const bool readable = (events & ZMQ_POLLIN) != 0;
  drained_[socket] = !readable;
  return readable;
}

Status SocketWaiter::Poll(std::vector<zmq::pollitem_t>& items, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  fds_.resize(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    zmq::pollitem_t& item = items[i];
    item.revents = 0;
    int fd = item.fd;
    if (item.socket != nullptr) {
      size_t size = sizeof(fd);
      if (zmq_getsockopt(item.socket, ZMQ_FD, &fd, &size) != 0) fd = -1;  // Ask says why
    }
    fds_[i] = {fd, POLLIN, 0};
  }
  while (true) {
    bool ready = false;
    // Sockets that may hold an unannounced message; with one ready, poll(2) only looks.
    for (zmq::pollitem_t& item : items) {
      if (item.socket == nullptr) continue;
      auto known = drained_.find(item.socket);
      if (known != drained_.end() && known->second) continue;
      ATOLL_ASSIGN_OR_RETURN(bool readable, Ask(item.socket));
      if (readable) item.revents = ZMQ_POLLIN;
      ready = ready || readable;
    }
    // Rounded up: rounded down, the last millisecond before the deadline would be a busy
    // loop of polls that wait 0 ms.
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    const int wait = ready ? 0 : static_cast<int>(std::max<int64_t>(0, left.count()));
    const int polled = poll(fds_.data(), fds_.size(), wait);
    if (polled < 0) {
      if (errno == EINTR) return Status::Ok();
      return Unavailable(std::string("poll failed: ") + std::strerror(errno));
    }
    for (size_t i = 0; polled > 0 && i < items.size(); ++i) {
      zmq::pollitem_t& item = items[i];
      const short revents = fds_[i].revents;
      if ((revents & (POLLIN | POLLERR | POLLHUP)) == 0 || item.revents != 0) continue;
      if (item.socket == nullptr) {
        item.revents = static_cast<short>(((revents & (POLLIN | POLLHUP)) ? ZMQ_POLLIN : 0) |
                                          ((revents & POLLERR) ? ZMQ_POLLERR : 0));
        ready = true;
        continue;
      }
      // Its fd announced something (a message, or another of ZeroMQ's commands): ask.
      ATOLL_ASSIGN_OR_RETURN(bool readable, Ask(item.socket));
      if (readable) item.revents = ZMQ_POLLIN;
      ready = ready || readable;
    }
    if (ready || std::chrono::steady_clock::now() >= deadline) return Status::Ok();
  }
}

}  // namespace atl::net
