// `atoll top`: a terminal view of the cluster refreshed live from the event stream (see
// cluster_view.h for what it shows and top_view.h for the layout). On a terminal it takes
// the alternate screen and redraws in place; `q` or Ctrl-C quits. Otherwise (or with
// --batch) it prints one frame after another, separated by a blank line.
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <ctime>
#include <iostream>

#include <fmt/format.h>

#include "cli/cluster_view.h"
#include "cli/commands.h"
#include "cli/live_feed.h"
#include "cli/top_view.h"
#include "common/net/event_loop.h"

namespace atl {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct TopOptions {
  int64_t interval_ms = 1000;         // between frames
  int64_t status_interval_ms = 2000;  // between GetClusterStatus calls
  uint64_t iterations = 0;            // frames to draw; 0: until quit
  bool batch = false;                 // plain frames even on a terminal
};

// Takes over the terminal for a full-screen view and gives it back on destruction (also
// when a failure unwinds): alternate screen, hidden cursor, keys without echo or Enter.
class Screen {
 public:
  explicit Screen(bool full_screen) : full_screen_(full_screen) {
    if (!full_screen_) return;
    std::cout << "\x1b[?1049h\x1b[?25l" << std::flush;
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      restore_termios_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
  }
  ~Screen() {
    if (!full_screen_) return;
    if (restore_termios_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
    std::cout << "\x1b[?25h\x1b[?1049l" << std::flush;
  }
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;

  // Whether `q` (or Q) was typed since the last call.
  bool QuitKeyPressed() const {
    if (!restore_termios_) return false;
    pollfd p{STDIN_FILENO, POLLIN, 0};
    while (poll(&p, 1, 0) > 0 && (p.revents & POLLIN)) {
      char c = 0;
      if (read(STDIN_FILENO, &c, 1) != 1) return false;
      if (c == 'q' || c == 'Q') return true;
    }
    return false;
  }

  void Draw(const std::vector<std::string>& lines) const {
    std::string out;
    if (full_screen_) {
      out = "\x1b[H";
      for (const auto& line : lines) out += line + "\x1b[K\n";
      out += "\x1b[J";
    } else {
      for (const auto& line : lines) out += line + "\n";
      out += "\n";
    }
    std::cout << out << std::flush;
  }

 private:
  bool full_screen_;
  bool restore_termios_ = false;
  termios saved_{};
};

std::string WallClock() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return buf;
}

void TerminalSize(size_t& width, size_t& height) {
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 1) {
    width = ws.ws_col;
    height = ws.ws_row - 1u;  // a newline on the last row would scroll the screen
  }
}

void RunTop(const TopOptions& opts, const GlobalOptions& global) {
  auto info = ResolveCluster(global);
  if (!info.ok()) Fail(info.status());
  InstallShutdownSignals();
  zmq::context_t context(1);
  if (Status s = SecureContext(context, global); !s.ok()) Fail(s.WithContext("top"));
  LiveFeed feed(context, *info);
  if (Status s = feed.Connect(); !s.ok()) Fail(s.WithContext("top"));
  ClusterView view;
  // The topology comes from the RM once: a cluster that does not answer is an error here,
  // later it is a notice on the screen.
  auto status = feed.ClusterStatus(milliseconds(3000));
  if (!status.ok()) {
    Fail("top: RM at " + info->rm_endpoint + " did not answer: " + status.status().ToString() +
         " (is the cluster running? see `atoll up`)");
  }
  view.ApplyStatus(*status);

  const bool full_screen = !opts.batch && isatty(STDOUT_FILENO);
  Screen screen(full_screen);
  std::string notice;
  uint64_t frames = 0;
  auto next_frame = Clock::now();
  auto next_status = Clock::now() + milliseconds(opts.status_interval_ms);
  while (!ShutdownRequested()) {
    const auto now = Clock::now();
    if (now >= next_frame) {
      TopRenderOptions render;
      render.rm_endpoint = info->rm_endpoint;
      render.clock = WallClock();
      render.notice = notice;
      if (full_screen) TerminalSize(render.width, render.height);
      screen.Draw(RenderTop(view, render));
      if (opts.iterations > 0 && ++frames >= opts.iterations) break;
      next_frame += milliseconds(opts.interval_ms);
      if (next_frame < now) next_frame = now + milliseconds(opts.interval_ms);
    }
    if (now >= next_status) {
      auto s = feed.ClusterStatus(milliseconds(1000));
      if (s.ok()) {
        view.ApplyStatus(*s);
        notice.clear();
      } else {
        notice = "! RM at " + info->rm_endpoint + " is not answering: " + s.status().ToString();
      }
      next_status = Clock::now() + milliseconds(opts.status_interval_ms);
    }
    // Rounded up, so that the last millisecond before a frame is not a busy loop.
    const auto until_frame = std::chrono::ceil<milliseconds>(next_frame - Clock::now()).count();
    auto events = feed.Receive(milliseconds(std::clamp<int64_t>(until_frame, 0, 50)));
    if (!events.ok()) {
      if (ShutdownRequested()) break;
      Fail(events.status().WithContext("top"));
    }
    for (const Event& e : *events) view.Apply(e);
    if (screen.QuitKeyPressed()) break;
  }
}

}  // namespace

void AddTopCommand(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<TopOptions>();
  auto* cmd = app.add_subcommand(
      "top", "Live view of islands, hosts, devices (busy %, queued gangs), memory, programs");
  cmd->add_option("--interval-ms", opts->interval_ms, "Time between two refreshes")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{50}, int64_t{3600000}));
  cmd->add_option("--status-interval-ms", opts->status_interval_ms,
                  "Time between two GetClusterStatus calls to the RM (host liveness, slices)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, int64_t{3600000}));
  cmd->add_option("--iterations,-n", opts->iterations, "Stop after this many frames (0: until q)")
      ->capture_default_str();
  cmd->add_flag("--batch,-b", opts->batch,
                "Print frames one after another instead of redrawing the screen");
  cmd->callback([opts, &global] { RunTop(*opts, global); });
}

}  // namespace atl
