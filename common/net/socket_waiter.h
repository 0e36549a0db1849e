// SocketWaiter: waits for messages on ZeroMQ sockets (and plain fds) as zmq::poll does, for
// a fraction of its system calls.
//
// Asking a socket whether it holds a message (ZMQ_EVENTS) costs two system calls, getpid
// and poll on its mailbox, and zmq::poll asks every socket twice a call, once before it
// sleeps and once after. On the virtual machines atoll is measured on, a system call costs
// about a microsecond: an executor's loop paid some 20 us a wake-up for its four sockets.
// A waiter sleeps in poll(2) on the sockets' notification fds (ZMQ_FD) instead, and asks
// only the sockets whose state it does not know.
//
// A socket's fd announces a message only when the socket's queue was empty. Once ZeroMQ
// looked at the socket (any send, receive or poll on it), a message that came meanwhile
// may wait unannounced. So a socket is known drained, and left unasked, only while the last
// look at it found nothing: a receive that came back empty, or an ask. Every call of
// transport.h tells the waiter open on its thread which socket it used and whether it
// found it empty (NoteUse); a use the waiter is not told of (a raw cppzmq call on the
// socket) could leave a message unannounced until the socket is next asked (Forget).
//
// Not thread-safe: made, used and destroyed on one thread, whose waiter it is meanwhile
// (a waiter made while another is open hands what it learnt back to it at its end).
#pragma once

#include <poll.h>

#include <chrono>
#include <unordered_map>
#include <vector>

#include <zmq.hpp>

#include "atoll/status.h"

namespace atl::net {

class SocketWaiter {
 public:
  SocketWaiter();
  ~SocketWaiter();
  SocketWaiter(const SocketWaiter&) = delete;
  SocketWaiter& operator=(const SocketWaiter&) = delete;

  // Waits at most `timeout` until one of `items` is readable, and sets each one's revents
  // (ZMQ_POLLIN, or ZMQ_POLLERR for an fd in error); only ZMQ_POLLIN is waited for. A wait
  // a signal interrupts returns OK early, with nothing ready. Cancelled when a socket's
  // context was terminated.
  Status Poll(std::vector<zmq::pollitem_t>& items, std::chrono::milliseconds timeout);

  // Asks every socket again at its next Poll.
  void Forget() { drained_.clear(); }

  // `socket` was used on this thread; `drained`: by a receive that found nothing.
  static void NoteUse(void* socket, bool drained);

 private:
  // Whether `socket` holds a message; records the answer.
  Result<bool> Ask(void* socket);

  SocketWaiter* const outer_;
  std::unordered_map<void*, bool> drained_;  // by socket: the last look found nothing
  std::vector<pollfd> fds_;
};

}  // namespace atl::net
