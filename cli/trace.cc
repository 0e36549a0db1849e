// `atoll trace`: turns the event stream of a run into Chrome / Perfetto trace JSON
// (trace_events.h): one track per device, one slice per shard's run, coloured by client.
// The events come from a file of `atoll watch --json` lines (--from FILE, "-" for stdin) or
// live from the event bus, until --count gang.done events, --timeout-s seconds, or
// SIGINT/SIGTERM; then the trace is written to -o FILE (default stdout).
#include "cli/trace.h"

#include <unistd.h>

#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "cli/follow_events.h"
#include "cli/trace_events.h"
#include "common/net/event_loop.h"
#include "common/net/event_topics.h"
#include "common/net/events.h"
#include "common/net/transport.h"

namespace atl {

namespace {

using Clock = std::chrono::steady_clock;

struct TraceOptions {
  std::string from;      // JSON lines file; "-": stdin; empty: live from the event bus
  std::string out;       // trace file; empty or "-": stdout
  uint64_t count = 0;    // live: stop after this many gang.done events; 0: no limit
  double timeout_s = 0;  // live: stop after this many seconds; 0: no limit
};

// Reads the events of `opts.from` into `builder`; fails the command on a bad line.
void ReadFile(const TraceOptions& opts, trace::TraceBuilder& builder) {
  Status s;
  if (opts.from == "-") {
    s = trace::AddJsonLines(std::cin, builder);
  } else {
    std::ifstream in(opts.from);
    if (!in) Fail("trace: cannot read " + opts.from);
    s = trace::AddJsonLines(in, builder);
  }
  if (!s.ok()) Fail(s.WithContext("trace: " + opts.from));
}

// Subscribes to the cluster's event bus and adds events to `builder` until the bounds of
// `opts` or a shutdown signal. Returns false when --count was not reached by --timeout-s.
bool ReadLive(const TraceOptions& opts, const GlobalOptions& global, trace::TraceBuilder& builder) {
  // The gangs, and the device events that name each host's island.
  FollowEvents(global,
               {"trace",
                {std::string(topics::kGangDone), std::string(topics::kErrorGang),
                 std::string(topics::kDeviceRegistered), std::string(topics::kDeviceStats)},
                opts.timeout_s,
                "tracing events at {} (Ctrl-C stops and writes)"},
               [&](const Event& event) -> Result<bool> {
                 ATOLL_RETURN_IF_ERROR(builder.Add(event));
                 return opts.count == 0 || builder.gangs() < opts.count;
               });
  return opts.count == 0 || builder.gangs() >= opts.count || ShutdownRequested();
}

void Write(const TraceOptions& opts, const trace::TraceBuilder& builder) {
  const std::string text =
      builder.ToJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (opts.out.empty() || opts.out == "-") {
    std::cout << text << std::endl;
    return;
  }
  std::ofstream out(opts.out);
  out << text << "\n";
  out.close();
  if (!out) Fail("trace: cannot write " + opts.out);
  std::cout << fmt::format("wrote {} gangs on {} devices, {} errors to {}", builder.gangs(),
                           builder.devices(), builder.errors(), opts.out)
            << std::endl;
}

void RunTrace(const TraceOptions& opts, const GlobalOptions& global) {
  trace::TraceBuilder builder;
  bool complete = true;
  if (!opts.from.empty()) {
    ReadFile(opts, builder);
  } else {
    complete = ReadLive(opts, global, builder);
  }
  Write(opts, builder);  // what arrived, even when short of --count
  if (!complete) {
    Fail("trace: " + std::to_string(builder.gangs()) + " of " + std::to_string(opts.count) +
         " gang.done events arrived within " + fmt::format("{:g}", opts.timeout_s) +
         " s (the trace holds those)");
  }
}

}  // namespace

void AddTraceCommand(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<TraceOptions>();
  auto* cmd = app.add_subcommand(
      "trace", "Write the cluster's gangs as a Chrome/Perfetto trace (ui.perfetto.dev)");
  cmd->add_option("--from", opts->from,
                  "Read events from this file of `atoll watch --json` lines (\"-\": stdin) "
                  "instead of the live event bus; add `--topic device.` to the watch to name "
                  "islands");
  cmd->add_option("-o,--out", opts->out, "Write the trace to this file (default: stdout)");
  cmd->add_option("--count", opts->count,
                  "Live: stop after this many gang.done events (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--timeout-s", opts->timeout_s,
                  "Live: stop after this many seconds (0: until Ctrl-C); with --count, fewer "
                  "gangs than asked for by then is a failure (the trace is still written)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->callback([opts, &global] { RunTrace(*opts, global); });
}

}  // namespace atl
