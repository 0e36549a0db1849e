// Messages island schedulers handle or send. See protocol.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "common/proto/executor_messages.h"
#include "common/proto/message_kind.h"

namespace atl::proto {

struct PlacedEntry {
  std::string executor;  // the executor's control endpoint
  Entry entry;
  bool operator==(const PlacedEntry&) const = default;
  MSGPACK_DEFINE(executor, entry);
};

// A node of a run that crosses islands. Every island releases a node only after each node
// on another island that feeds it was released there, so that the islands' orders never
// contradict the program's edges (docs/design-notes.md, "One order across islands").
struct CrossIslandNode {
  uint32_t node = 0;
  std::vector<uint32_t> after;           // nodes on other islands that feed this one
  std::vector<std::string> announce_to;  // schedulers of the other islands it feeds
  bool operator==(const CrossIslandNode&) const = default;
  MSGPACK_DEFINE(node, after, announce_to);
};

// Client -> island scheduler: the whole subgraph of one program run on this island, its
// entries grouped by node in topological order. Answered with SubmitReply or Error.
struct SubmitProgram {
  static constexpr Kind kKind = Kind::kSubmitProgram;
  uint64_t client_id = 0;
  uint64_t run_id = 0;
  std::vector<PlacedEntry> entries;
  // The client's share under proportional-share scheduling (relative to other clients').
  double weight = 1.0;
  // The run's nodes on this island that are fed by, or feed, other islands; empty for a
  // run on one island.
  std::vector<CrossIslandNode> cross_island;
  // Send the client RunDone once every gang of the run on this island finished: set when
  // the run reads earlier runs' futures, which the client keeps alive until then.
  bool notify_done = false;
  bool operator==(const SubmitProgram&) const = default;
  MSGPACK_DEFINE(client_id, run_id, entries, weight, cross_island, notify_done);
};

// Client -> island scheduler, and scheduler -> the executors it dispatched the run's
// entries to: drop what is left of run `run_id`. The scheduler places the run's queued
// gangs at once, failed with Cancelled (so that their results and consumers hear why);
// an executor fails the run's queued shards and stops its running one at the next check
// (between ops, and every millisecond of a spin) or in a collective. A notice: no reply.
struct CancelRun {
  static constexpr Kind kKind = Kind::kCancelRun;
  uint64_t client_id = 0;
  uint64_t run_id = 0;
  // Empty: the client cancelled it (Cancelled). Otherwise the scheduler stops a run that
  // already failed, and its shards fail with this (Unavailable): a host of it was lost, so
  // its partners there would only wait out their collectives.
  std::string failure;
  bool operator==(const CancelRun&) const = default;
  MSGPACK_DEFINE(client_id, run_id, failure);
};

// Scheduler -> client (request id 0, on the connection the submission came in on): every
// gang of run `run_id` on this island finished, failed or was dropped, so its executors
// read all they were to read. Sent only for a submission with notify_done.
struct RunDone {
  static constexpr Kind kKind = Kind::kRunDone;
  uint64_t run_id = 0;
  bool operator==(const RunDone&) const = default;
  MSGPACK_DEFINE(run_id);
};

// Scheduler -> client (request id 0, like RunDone): a shard of run `run_id` failed with
// (`error_code`, `error`), so the run's results will not all come: a reader stops waiting
// now. Some failures can never reach the results' stores (an executor whose store
// restarted cannot seal what it never reserved there). Sent once, for the run's first
// failed shard on this island that the client did not cancel.
struct RunFailed {
  static constexpr Kind kKind = Kind::kRunFailed;
  uint64_t run_id = 0;
  int32_t error_code = 0;  // an atl::Code
  std::string error;
  bool operator==(const RunFailed&) const = default;
  MSGPACK_DEFINE(run_id, error_code, error);
};

// Scheduler -> scheduler: node `node` of run `run_id` took its place in the sender's
// island order, so nodes it feeds may take theirs. A notice: no reply.
struct NodeReleased {
  static constexpr Kind kKind = Kind::kNodeReleased;
  uint64_t run_id = 0;
  uint32_t node = 0;
  bool operator==(const NodeReleased&) const = default;
  MSGPACK_DEFINE(run_id, node);
};

// The program was accepted and its gangs queued; they get their places in the island's
// order when the scheduling policy releases them.
struct SubmitReply {
  static constexpr Kind kKind = Kind::kSubmitReply;
  uint32_t gangs = 0;
  bool operator==(const SubmitReply&) const = default;
  MSGPACK_DEFINE(gangs);
};

// Executor -> scheduler (on the scheduler's own DEALER): all of this executor's shards of
// one gang finished. Sent once per gang and executor, in the loop turn that saw the last of
// them, so a gang costs its scheduler one message per executor it spans, however many
// shards. The scheduler's policy learns from it what is in flight.
struct GangDone {
  static constexpr Kind kKind = Kind::kGangDone;
  uint64_t gang_seq = 0;
  uint32_t shards = 0;     // how many of the gang's shards this report covers
  uint64_t busy_us = 0;    // the longest of those shards' time on its device
  int32_t error_code = 0;  // atl::Code of a failed shard among them; 0: none failed
  std::string error;       // that shard's error message, when one failed
  bool operator==(const GangDone&) const = default;
  MSGPACK_DEFINE_TRIMMED(gang_seq, shards, busy_us, error_code, error);
};

}  // namespace atl::proto
