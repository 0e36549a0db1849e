// `atoll watch`: subscribes to the RM's event bus and prints each event as a human line or
// as one JSON object per line, until N events, S seconds, or SIGINT/SIGTERM.
#include <unistd.h>

#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/follow_events.h"
#include "common/net/event_loop.h"
#include "common/net/event_reader.h"
#include "common/net/transport.h"

namespace atl {

namespace {

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
  uint64_t seen = 0;
  FollowEvents(global,
               {"watch", opts.topics, opts.timeout_s, "watching events at {} (Ctrl-C stops)"},
               [&](const Event& event) -> Result<bool> {
                 std::cout << (opts.json ? JsonLine(event) : FormatEventLine(event)) << std::endl;
                 // stdout closed (`atoll watch | head`): nothing more to do.
                 if (!std::cout) return false;
                 return opts.count == 0 || ++seen < opts.count;
               });
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
