// `atoll watch`: subscribes to the RM's event bus and prints each event as a human line or
// as one JSON object per line, until N events, S seconds, or SIGINT/SIGTERM.
#include <unistd.h>

#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/event_loop.h"
#include "common/events.h"
#include "common/transport.h"

namespace atl {

namespace {

using Clock = std::chrono::steady_clock;

struct WatchOptions {
  std::vector<std::string> topics;  // prefixes; empty: every event
  bool json = false;
  uint64_t count = 0;    // stop after this many events; 0: no limit
  double timeout_s = 0;  // stop after this many seconds; 0: no limit
};

std::string JsonLine(const Event& event) {
  nlohmann::ordered_json out;
  out["topic"] = event.topic;
  for (const auto& [key, value] : event.fields.items()) out[key] = value;
  return out.dump();
}

void RunWatch(const WatchOptions& opts, const GlobalOptions& global) {
  auto info = ResolveCluster(global);
  if (!info.ok()) Fail(info.status());
  if (info->events_out.empty()) {
    Fail("watch: no event bus endpoint known for the RM at " + info->rm_endpoint +
         "; pass --events EP");
  }
  InstallShutdownSignals();
  zmq::context_t context(1);
  zmq::socket_t sub = net::MakeSocket(context, zmq::socket_type::sub);
  try {
    if (opts.topics.empty()) sub.set(zmq::sockopt::subscribe, "");
    for (const auto& t : opts.topics) sub.set(zmq::sockopt::subscribe, t);
  } catch (const zmq::error_t& e) {
    Fail(std::string("watch: cannot subscribe: ") + e.what());
  }
  if (Status s = net::Connect(sub, info->events_out); !s.ok()) Fail(s.WithContext("watch"));
  if (isatty(STDOUT_FILENO)) {
    std::cerr << "watching events at " << info->events_out << " (Ctrl-C stops)" << std::endl;
  }

  const bool bounded = opts.timeout_s > 0;
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(opts.timeout_s * 1000));
  uint64_t seen = 0;
  bool warned_malformed = false;
  while (!ShutdownRequested() && (opts.count == 0 || seen < opts.count)) {
    auto wait = std::chrono::milliseconds(200);
    if (bounded) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      wait = std::min(wait, left);
    }
    auto frames = net::RecvFrames(sub, wait);
    if (!frames.ok()) {
      if (ShutdownRequested()) break;
      Fail(frames.status().WithContext("watch"));
    }
    if (!*frames) continue;
    auto event = (*frames)->size() == 2 ? DecodeEvent((**frames)[0], (**frames)[1])
                                        : Result<Event>(InvalidArgument("event is not 2 frames"));
    if (!event.ok()) {
      if (!warned_malformed) {
        std::cerr << "atoll: watch: skipping malformed events (" << event.status().message() << ")"
                  << std::endl;
        warned_malformed = true;
      }
      continue;
    }
    std::cout << (opts.json ? JsonLine(*event) : FormatEventLine(*event)) << std::endl;
    if (!std::cout) return;  // stdout closed (`atoll watch | head`): nothing more to do
    ++seen;
  }
  if (opts.count > 0 && seen < opts.count && !ShutdownRequested()) {
    Fail("watch: " + std::to_string(seen) + " of " + std::to_string(opts.count) +
         " events arrived within " + fmt::format("{:g}", opts.timeout_s) + " s");
  }
}

}  // namespace

void AddWatchCommand(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<WatchOptions>();
  auto* cmd = app.add_subcommand("watch", "Print the cluster's event stream");
  cmd->add_option("--topic", opts->topics,
                  "Only events whose topic starts with this prefix (device., slice., program., "
                  "gang., object., error.); repeatable; default: all");
  cmd->add_flag("--json", opts->json, "One JSON object per line: {\"topic\": ..., fields...}");
  cmd->add_option("--count", opts->count, "Stop after this many events (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--timeout-s", opts->timeout_s,
                  "Stop after this many seconds (0: until Ctrl-C); with --count, fewer events "
                  "than asked for by then is a failure")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->callback([opts, &global] { RunWatch(*opts, global); });
}

}  // namespace atl
