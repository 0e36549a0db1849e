// Counts of the messages this process sent, by message kind: how many and how many bytes
// (header and data frames, not the routing id), for every message that goes through
// net::Send, net::Reply or a Requester (see transport.h). Services publish them as the
// `net.stats` event every heartbeat, so that a watcher (bench/control) can tell how many
// control messages a computation costs by diffing two reports. Events themselves are not
// counted. Thread-safe: relaxed atomics, one pair per kind.
//
// Example:
//   net::CountSent(proto::Kind::kDispatch, frames_bytes);
//   events.Publish("net.stats", net::SentCountFields());  // {"Dispatch.msgs": 1, ...}
#pragma once

#include <cstdint>
#include <map>

#include "common/net/event_fields.h"
#include "common/proto/protocol.h"

namespace atl::net {

struct SentCount {
  uint64_t messages = 0;
  uint64_t bytes = 0;
  bool operator==(const SentCount&) const = default;
};

// Records one message of `kind` and `bytes` sent by this process.
void CountSent(proto::Kind kind, uint64_t bytes);

// Every kind sent at least once so far, with its totals. Kinds outside the protocol's
// range are counted under Kind{0} ("unknown").
std::map<proto::Kind, SentCount> SentCounts();

// The same as event fields: "<KindName>.msgs" and "<KindName>.bytes" for every kind sent,
// and "pid": the counts are the process's, which several services may share (the hosts of
// one atoll-simhosts process), so a reader adds up one report per pid.
EventFields SentCountFields();

}  // namespace atl::net
