// Logging the messages a service rejects, rate-limited per peer, so that a flood of bad
// messages costs a few lines a second instead of one per message. The first rejection from
// a peer is logged at once; later ones are counted, and once `interval` has passed since the
// last line for that peer, one line gives their count and the last error: at the next
// rejection from that peer or at the next Flush(), whichever comes first.
//
// Example (a ROUTER socket's peer is its routing id, in hex):
//   net::RejectionLog rejected;
//   rejected.Reject("peer " + net::HexBytes(routing_id.to_string_view()), status);
//   // "rejected 1 message from peer 0080000001: InvalidArgument: unknown kind 99"
//   // "rejected 4213 messages from peer 0080000001 in the last 1.0 s; last: InvalidArgument: ..."
//
// Not thread-safe: each one belongs to one loop (a service's, or a Requester's thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "atoll/status.h"

namespace atl::net {

// "0080000001" for the bytes 00 80 00 00 01: how a ZeroMQ routing id is printed.
std::string HexBytes(std::string_view bytes);

struct RejectionLogOptions {
  // The words of a line: "{verb} {count} {one|many} from {peer}".
  std::string verb = "rejected";
  std::string one = "message";
  std::string many = "messages";
  // At most one line per peer per interval.
  std::chrono::milliseconds interval{1000};
  // Peers counted apart; rejections from any further peer within an interval are counted
  // together as "other peers", so that a flood from many connections is bounded too.
  size_t max_peers = 256;
  // Where time comes from; empty: std::chrono::steady_clock (a test moves time by hand).
  std::function<std::chrono::steady_clock::time_point()> clock = {};
  // Where lines go; empty: spdlog's warning level.
  std::function<void(const std::string& line)> sink = {};
};

class RejectionLog {
 public:
  explicit RejectionLog(RejectionLogOptions options = {});

  // Counts a message from `peer` (how the line names it) rejected with `error`, logging it
  // at once when it is the first from that peer for an interval, or the count so far when
  // the interval since the peer's last line has passed.
  void Reject(const std::string& peer, const Status& error);

  // Logs the count of every peer whose interval has passed with rejections not yet logged,
  // and forgets peers quiet for a whole interval. Cheap: call it on every loop turn.
  void Flush();

  // Rejections counted in all, logged or not (for tests and statistics).
  uint64_t total() const { return total_; }

 private:
  using TimePoint = std::chrono::steady_clock::time_point;
  struct Peer {
    TimePoint since;        // when its last line was written
    uint64_t unlogged = 0;  // rejections since then
    Status last;            // the last of them
  };

  TimePoint Now() const;
  void WriteCount(const std::string& peer, Peer& p, TimePoint now);

  RejectionLogOptions options_;
  std::map<std::string, Peer, std::less<>> peers_;
  uint64_t total_ = 0;
};

}  // namespace atl::net
