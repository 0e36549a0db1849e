// EventLoop: one per service thread. Waits on its sockets (and raw fds) with a SocketWaiter
// (socket_waiter.h: zmq::poll's semantics for a fraction of its system calls) and runs
// named handlers and periodic timers; every handler's call count and run time are kept so
// that a slow handler can be found, and so is the loop's longest stall: the longest turn
// (every handler and timer it ran between two polls), when no message was read, no
// heartbeat sent or answered. Not thread-safe: call everything from the thread that
// runs it, except Stop(), which any thread (or a signal handler, via the shutdown fd) may
// call.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <zmq.hpp>

namespace atl {

class EventLoop {
 public:
  using Handler = std::function<void()>;

  // `idle_bound`: the longest a turn sleeps with nothing to do, so that Stop() from another
  // thread is seen.
  explicit EventLoop(std::chrono::milliseconds idle_bound = std::chrono::milliseconds(100))
      : idle_bound_(idle_bound) {}

  struct HandlerStats {
    std::string name;
    uint64_t calls = 0;
    std::chrono::nanoseconds busy{0};
  };

  // Runs `on_readable` whenever `socket` has a message waiting (once per poll wake-up; the
  // handler should drain what it can without blocking). May be called from a handler while
  // the loop runs: the socket is polled from the next turn on.
  void AddSocket(std::string name, zmq::socket_t& socket, Handler on_readable);
  // Same for a file descriptor (a pipe, the shutdown signal fd).
  void AddFd(std::string name, int fd, Handler on_readable);
  // Runs `handler` every `period`, first one period from now.
  void AddTimer(std::string name, std::chrono::milliseconds period, Handler handler);

  // Polls until Stop() or until the process-wide shutdown signal fd fires (or the sockets'
  // context is terminated). After a sleep of `idle_bound` that nothing ended, every socket
  // is asked again, as a backstop for a use its SocketWaiter was not told of.
  void Run();
  void Stop() { stop_.store(true); }

  std::vector<HandlerStats> Stats() const;

  struct Stall {
    std::chrono::nanoseconds longest{0};
    std::string in;  // the handler that took the longest part of that turn
  };
  // The longest turn since the loop started. Read it from the loop's thread (a handler).
  const Stall& LongestStall() const { return longest_stall_; }
  uint64_t LongestStallMicros() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(longest_stall_.longest).count();
  }

 private:
  struct Source {
    HandlerStats stats;
    Handler handler;
  };
  struct Timer {
    HandlerStats stats;
    std::chrono::milliseconds period;
    std::chrono::steady_clock::time_point next;
    Handler handler;
  };
  // Runs `handler`, counting its time for `stats` and for the turn's longest part.
  void Invoke(HandlerStats& stats, const Handler& handler);
  // Ends a turn that started at `start`.
  void EndTurn(std::chrono::steady_clock::time_point start);

  const std::chrono::milliseconds idle_bound_;
  std::vector<zmq::pollitem_t> items_;
  std::vector<Source> sources_;  // parallel to items_
  // Sources added while running, merged between turns so no handler vector moves under a
  // running handler.
  std::vector<zmq::pollitem_t> added_items_;
  std::vector<Source> added_sources_;
  std::vector<Timer> timers_;
  std::atomic<bool> stop_{false};
  Stall longest_stall_;
  std::chrono::nanoseconds turn_longest_part_{0};
  const std::string* turn_longest_in_ = nullptr;
};

// Installs SIGINT/SIGTERM handlers that make every EventLoop in the process return, and
// ignores SIGPIPE. Call once, early in main().
void InstallShutdownSignals();
// True once SIGINT or SIGTERM arrived.
bool ShutdownRequested();

// Microseconds on the steady clock (the one loop timers use): for the bounded waits that
// services check on a timer, never for timestamps that leave the process.
int64_t SteadyMicros();

}  // namespace atl
