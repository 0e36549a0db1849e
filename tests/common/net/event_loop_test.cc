// The event loop sleeps on its sockets' notification fds and asks a socket for messages only
// when it may hold one its fd will not announce. These tests make ZeroMQ swallow that
// announcement, as it does when a socket is used while a message is on its way, and check
// that the message is still handled at once rather than when the loop next wakes for
// something else (a watchdog timer, 10 s away, whose firing fails the test).
//
// inproc sockets, so that a send is in the receiving socket's queue, and its announcement in
// that socket's mailbox, by the time the send returns.
#include <time.h>
#include <unistd.h>

#include <zmq.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "common/net/event_loop.h"
#include "common/net/transport.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kWatchdog{10000};
constexpr milliseconds kIdleBound{60000};  // no backstop wake-up within the watchdog

// A PAIR socket bound in process and its peer.
struct Pair {
  Pair(zmq::context_t& context, const std::string& name)
      : socket(context, zmq::socket_type::pair), peer(context, zmq::socket_type::pair) {
    socket.bind("inproc://" + name);
    peer.connect("inproc://" + name);
  }
  zmq::socket_t socket;
  zmq::socket_t peer;
};

net::Frames OneFrame(const std::string& text) {
  net::Frames frames;
  frames.emplace_back(text.data(), text.size());
  return frames;
}

// A loop that stops on success or when the watchdog fires; `start` runs once, from a timer,
// after the loop has looked at every socket.
class LoopHarness {
 public:
  explicit LoopHarness(std::function<void()> start) : loop_(kIdleBound) {
    loop_.AddTimer("start", milliseconds(1), [this, start = std::move(start)] {
      if (started_) return;
      started_ = true;
      start();
    });
    loop_.AddTimer("watchdog", kWatchdog, [this] {
      watchdog_fired_ = true;
      loop_.Stop();
    });
  }
  EventLoop& loop() { return loop_; }
  void Succeed() {
    succeeded_ = true;
    loop_.Stop();
  }
  void Run() {
    loop_.Run();
    EXPECT_FALSE(watchdog_fired_) << "the message waited for the loop's next wake-up";
    EXPECT_TRUE(succeeded_);
  }

 private:
  EventLoop loop_;
  bool started_ = false;
  bool succeeded_ = false;
  bool watchdog_fired_ = false;
};

TEST(EventLoopTest, AMessageWhoseAnnouncementASendSwallowedIsHandledAtOnce) {
  zmq::context_t context;
  Pair data(context, "data");
  Pair trigger(context, "trigger");
  std::string got;
  LoopHarness harness([&] { trigger.peer.send(zmq::str_buffer("go")); });
  harness.loop().AddSocket("trigger", trigger.socket, [&] {
    while (true) {
      auto frames = net::RecvFrames(trigger.socket, milliseconds(0));
      ASSERT_THAT(frames, IsOk());
      if (!frames->has_value()) break;
    }
    // A message for `data`, announced in its mailbox; then `data`'s first send, which reads
    // that mailbox (ZeroMQ does on a send at most once a millisecond, and on the first).
    // The message now waits in `data` with its fd quiet.
    data.peer.send(zmq::str_buffer("payload"));
    net::Frames ping = OneFrame("ping");
    ASSERT_THAT(net::SendFrames(data.socket, ping), IsOk());
  });
  harness.loop().AddSocket("data", data.socket, [&] {
    auto frames = net::RecvFrames(data.socket, milliseconds(0));
    ASSERT_THAT(frames, IsOk());
    if (!frames->has_value()) return;
    got = (**frames)[0].to_string();
    harness.Succeed();
  });
  harness.Run();
  EXPECT_EQ(got, "payload");
}

TEST(EventLoopTest, AHandlerThatLeavesMessagesIsCalledAgainUntilItTookThemAll) {
  zmq::context_t context;
  Pair data(context, "data");
  constexpr int kMessages = 3;
  int taken = 0;
  LoopHarness harness([&] {
    for (int i = 0; i < kMessages; ++i) data.peer.send(zmq::buffer(std::to_string(i)));
  });
  // Takes one message a call: the fd announced the first one only.
  harness.loop().AddSocket("data", data.socket, [&] {
    auto frames = net::RecvFrames(data.socket, milliseconds(0));
    ASSERT_THAT(frames, IsOk());
    ASSERT_TRUE(frames->has_value()) << "called with nothing waiting";
    EXPECT_EQ((**frames)[0].to_string(), std::to_string(taken));
    if (++taken == kMessages) harness.Succeed();
  });
  harness.Run();
  EXPECT_EQ(taken, kMessages);
}

TEST(EventLoopTest, AReadableFdAndAMessageAreBothHandled) {
  zmq::context_t context;
  Pair data(context, "data");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  bool fd_read = false;
  bool message_read = false;
  LoopHarness harness([&] {
    data.peer.send(zmq::str_buffer("x"));
    ASSERT_EQ(write(fds[1], "x", 1), 1);
  });
  auto done = [&] {
    if (fd_read && message_read) harness.Succeed();
  };
  harness.loop().AddFd("pipe", fds[0], [&] {
    char byte;
    ASSERT_EQ(read(fds[0], &byte, 1), 1);
    fd_read = true;
    done();
  });
  harness.loop().AddSocket("data", data.socket, [&] {
    while (true) {
      auto frames = net::RecvFrames(data.socket, milliseconds(0));
      ASSERT_THAT(frames, IsOk());
      if (!frames->has_value()) break;
      message_read = true;
    }
    done();
  });
  harness.Run();
  close(fds[0]);
  close(fds[1]);
}

std::chrono::nanoseconds ThreadCpuTime() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
}

// Between timers the loop sleeps in poll(2). Waits rounded down to whole milliseconds
// (the loop's for its next timer, or the waiter's for what is left of one) polled without
// sleeping through the last millisecond before each timer: with a timer every 2 ms, about
// half of the thread's time.
// The loop's longest stall is its longest turn, named by the handler that took most of it.
TEST(EventLoopTest, TheLongestStallIsTheLongestTurnAndNamesItsHandler) {
  EventLoop loop(kIdleBound);
  int fires = 0;
  loop.AddTimer("quick", milliseconds(1), [&] {
    if (++fires == 20) loop.Stop();
  });
  bool blocked = false;
  loop.AddTimer("blocking", milliseconds(5), [&] {
    if (blocked) return;
    blocked = true;
    // The subject of the test: a handler that blocks its loop (a synchronous call).
    std::this_thread::sleep_for(milliseconds(60));
  });
  loop.Run();
  EXPECT_GE(loop.LongestStall().longest, milliseconds(60));
  EXPECT_LT(loop.LongestStall().longest, milliseconds(kWatchdog));
  EXPECT_EQ(loop.LongestStall().in, "blocking");
  EXPECT_GE(loop.LongestStallMicros(), 60000u);
}

TEST(EventLoopTest, BetweenTimersTheLoopSleepsRatherThanPolling) {
  zmq::context_t context;
  Pair idle(context, "idle");
  EventLoop loop(kIdleBound);
  loop.AddSocket("idle", idle.socket, [] {});
  constexpr int kFires = 100;
  int fires = 0;
  loop.AddTimer("tick", milliseconds(2), [&] {
    if (++fires == kFires) loop.Stop();
  });
  const auto wall_start = std::chrono::steady_clock::now();
  const auto cpu_start = ThreadCpuTime();
  loop.Run();
  const auto cpu = ThreadCpuTime() - cpu_start;
  const auto wall = std::chrono::steady_clock::now() - wall_start;
  EXPECT_EQ(fires, kFires);
  // Asleep, the thread costs nothing: a quarter of the time is room for its wake-ups under
  // a sanitizer.
  EXPECT_LT(cpu * 4, wall) << "busy " << std::chrono::duration<double, std::milli>(cpu).count()
                           << " ms of " << std::chrono::duration<double, std::milli>(wall).count()
                           << " ms";
}

}  // namespace
}  // namespace atl
