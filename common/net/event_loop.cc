#include "common/net/event_loop.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "common/net/socket_waiter.h"

namespace atl {

namespace {

// The self-pipe: a signal handler may only write(2); loops poll the read end.
int g_shutdown_pipe[2] = {-1, -1};
std::atomic<bool> g_shutdown{false};

void OnShutdownSignal(int) {
  g_shutdown.store(true);
  const char byte = 1;
  [[maybe_unused]] auto n = write(g_shutdown_pipe[1], &byte, 1);
}

}  // namespace

void InstallShutdownSignals() {
  if (g_shutdown_pipe[0] < 0) {
    if (pipe2(g_shutdown_pipe, O_NONBLOCK | O_CLOEXEC) != 0) return;
  }
  struct sigaction action {};
  action.sa_handler = OnShutdownSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

bool ShutdownRequested() { return g_shutdown.load(); }

void EventLoop::AddSocket(std::string name, zmq::socket_t& socket, Handler on_readable) {
  added_items_.push_back({socket.handle(), 0, ZMQ_POLLIN, 0});
  added_sources_.push_back({{std::move(name)}, std::move(on_readable)});
}

void EventLoop::AddFd(std::string name, int fd, Handler on_readable) {
  added_items_.push_back({nullptr, fd, ZMQ_POLLIN, 0});
  added_sources_.push_back({{std::move(name)}, std::move(on_readable)});
}

void EventLoop::AddTimer(std::string name, std::chrono::milliseconds period, Handler handler) {
  timers_.push_back(
      {{std::move(name)}, period, std::chrono::steady_clock::now() + period, std::move(handler)});
}

void EventLoop::Invoke(HandlerStats& stats, const Handler& handler) {
  const auto start = std::chrono::steady_clock::now();
  handler();
  const auto took = std::chrono::steady_clock::now() - start;
  stats.calls++;
  stats.busy += took;
  if (took > turn_longest_part_) {
    turn_longest_part_ = took;
    turn_longest_in_ = &stats.name;
  }
}

void EventLoop::EndTurn(std::chrono::steady_clock::time_point start) {
  const auto took = std::chrono::steady_clock::now() - start;
  // A turn this long is worth a line: peers wait on it for their heartbeats' answers.
  if (took >= std::chrono::milliseconds(100)) {
    spdlog::warn("the event loop stalled for {} ms ({}: {} ms of it)",
                 std::chrono::duration_cast<std::chrono::milliseconds>(took).count(),
                 turn_longest_in_ != nullptr ? *turn_longest_in_ : "the loop itself",
                 std::chrono::duration_cast<std::chrono::milliseconds>(turn_longest_part_).count());
  }
  if (took > longest_stall_.longest) {
    longest_stall_.longest = took;
    longest_stall_.in = turn_longest_in_ != nullptr ? *turn_longest_in_ : "the loop itself";
  }
  turn_longest_part_ = std::chrono::nanoseconds(0);
  turn_longest_in_ = nullptr;
}

void EventLoop::Run() {
  net::SocketWaiter waiter;  // told of every use of a socket on this thread from now on
  std::vector<zmq::pollitem_t> items;
  auto asked_all = std::chrono::steady_clock::now();
  while (!stop_.load() && !g_shutdown.load()) {
    if (items.empty() || !added_items_.empty()) {
      for (auto& i : added_items_) items_.push_back(i);
      for (auto& s : added_sources_) sources_.push_back(std::move(s));
      added_items_.clear();
      added_sources_.clear();
      // The shutdown pipe is polled last so that a signal interrupts a blocked poll at once.
      items = items_;
      if (g_shutdown_pipe[0] >= 0) items.push_back({nullptr, g_shutdown_pipe[0], ZMQ_POLLIN, 0});
    }
    auto now = std::chrono::steady_clock::now();
    std::chrono::milliseconds wait = idle_bound_;
    // Rounded up: a wait rounded down to 0 ms would poll in a busy loop through the last
    // millisecond before each timer.
    for (const auto& t : timers_) {
      wait = std::min(wait, std::max(std::chrono::milliseconds(0),
                                     std::chrono::ceil<std::chrono::milliseconds>(t.next - now)));
    }
    const Status polled = waiter.Poll(items, wait);
    if (polled.code() == Code::kCancelled) return;  // the context was terminated
    // A turn: from the poll's return to the next poll, the loop hears nothing.
    const auto turn_start = std::chrono::steady_clock::now();
    bool any = false;
    for (size_t i = 0; i < sources_.size(); ++i) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      Invoke(sources_[i].stats, sources_[i].handler);
      any = true;
    }
    now = std::chrono::steady_clock::now();
    if (!any && now - asked_all >= idle_bound_) {
      waiter.Forget();
      asked_all = now;
    }
    for (auto& t : timers_) {
      if (now >= t.next) {
        Invoke(t.stats, t.handler);
        t.next = now + t.period;
      }
    }
    EndTurn(turn_start);
  }
}

std::vector<EventLoop::HandlerStats> EventLoop::Stats() const {
  std::vector<HandlerStats> out;
  for (const auto& s : sources_) out.push_back(s.stats);
  for (const auto& t : timers_) out.push_back(t.stats);
  return out;
}

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace atl
