// Turns atoll's event stream into a Chrome / Perfetto trace (the JSON "traceEvents" format,
// opened by ui.perfetto.dev or chrome://tracing), as `atoll trace` writes it:
//
//   - one process per host (pid 1, 2, ... in island then host order), named
//     "island0 / i0h0", or just "i0h0" while the host's island is unknown;
//   - one thread per device (tid = the cluster-wide device id), named "device 3";
//   - one complete event ("ph": "X") per `gang.done`: ts = start_us, dur = end_us - start_us,
//     in microseconds from the earliest event of the trace; named "run R node N", with args
//     {client, run, node, gang, shard}, coloured by client (Chrome's "cname", from a fixed
//     palette) so that interleaved clients can be told apart (the paper's Figure 9);
//   - one process-wide instant event ("ph": "i") per `error.gang`, at its ts_us.
//
// The island of a host comes from `device.registered` and `device.stats` events, when the
// stream has them. "otherData" records the wall-clock origin: {"origin_us", "gangs",
// "errors"}.
//
// Not thread-safe: one thread adds events and converts.
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "atoll/status.h"
#include "common/net/event_reader.h"

namespace atl::trace {

// The Chrome colour name ("cname") of a client's slices: a fixed palette indexed by client
// id, so a client keeps its colour across traces.
std::string_view ClientColor(uint64_t client);

class TraceBuilder {
 public:
  // Takes one event. `gang.done` and `error.gang` become trace events; `device.registered`
  // and `device.stats` name a host's island; every other topic is ignored (OK). A gang.done
  // or error.gang that lacks one of its fields, or holds one of the wrong type, is dropped
  // and gives InvalidArgument naming the field; the builder stays usable.
  Status Add(const Event& event);

  size_t gangs() const { return gangs_.size(); }    // gang.done events taken
  size_t errors() const { return errors_.size(); }  // error.gang events taken
  size_t devices() const;                           // distinct devices among the gangs

  // The trace: {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}. Metadata
  // events first, then the gangs and errors ordered by process, thread and time.
  nlohmann::ordered_json ToJson() const;

 private:
  struct Gang {
    uint64_t run, node, gang, shard, device, client;
    std::string host;
    int64_t start_us, end_us;
  };
  struct GangError {
    uint64_t run, node, shard;
    std::string host, error;
    int64_t ts_us;
  };

  std::vector<Gang> gangs_;
  std::vector<GangError> errors_;
  std::map<std::string, std::string> island_of_host_;
};

// Parses one line of `atoll watch --json` ({"topic": ..., "ts_us": ..., fields...}) back into
// an Event. InvalidArgument when it is not a JSON object with a string "topic".
Result<Event> ParseJsonLine(std::string_view line);

// Adds every line of `in` (JSON lines as `atoll watch --json` writes them; blank lines are
// skipped) to `builder`. Stops at the first line that does not parse or is a malformed
// gang event, with InvalidArgument "line N: ...".
Status AddJsonLines(std::istream& in, TraceBuilder& builder);

}  // namespace atl::trace
