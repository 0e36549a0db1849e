// ReadAhead: results read before they are asked for. A caller that waits for one run while
// later runs of this client are still unread usually reads those next (a batch submitted,
// then each result read in turn); read one at a time, each would cost a round trip to its
// store. So a wait also sends the reads of the later runs' small results at once: each
// waits in its store until the shard is sealed, and its reply is kept here until that run
// is waited for. A client that submits and waits one run at a time, or waits only for the
// last of a chain of futures, has no later unread run and reads nothing ahead.
//
// Bounded: results of at most kMaxResultBytes, at most kWindowRuns runs and kWindowBytes
// open or answered at once. Reads ahead go out on a socket of their own per store, which
// nothing else reads, so that no other reader of the client's store sockets drops their
// replies. A run dropped while a read ahead of it is still open must be released through
// that same socket (the one Drop returns), after the read: ZeroMQ keeps one socket's order, so the
// store answers the read (Cancelled) instead of waiting for a shard that was freed.
//
// Not thread-safe: the client's thread only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <zmq.hpp>

#include "atoll/status.h"
#include "common/net/transport.h"

namespace atl {

class ReadAhead {
 public:
  static constexpr uint64_t kMaxResultBytes = 64 * 1024;
  static constexpr uint64_t kWindowBytes = 4 * 1024 * 1024;
  static constexpr size_t kWindowRuns = 256;

  // A result shard that may be read ahead.
  struct Shard {
    std::string store;
    uint64_t object_id = 0;
    uint32_t shard = 0;
    uint64_t bytes = 0;  // at most its result's
  };

  explicit ReadAhead(zmq::context_t& context) : context_(context) {}

  // Run `run` (ids grow in submission order) was submitted with these shards to read.
  void Add(uint64_t run, std::vector<Shard> shards);

  // Run `run` is being read now: the reads of later unread runs go out, as many as the
  // window holds, each waiting up to `wait_ms` in its store.
  void ReadAfter(uint64_t run, uint32_t wait_ms);

  // What became of the read ahead of a shard: none was sent (or it outlived its wait in the
  // store, so it must be read again), it is still open, or here is its reply (taken: the
  // next look says none).
  struct Lookup {
    enum State { kNone, kOpen, kAnswered } state = kNone;
    std::optional<proto::Incoming> reply;
  };
  Lookup Take(uint64_t object_id, uint32_t shard);

  // Takes the replies that have come, without waiting.
  void Collect();

  // Appends its sockets (one per store read ahead from), to poll while waiting for replies.
  void AddPollItems(std::vector<zmq::pollitem_t>& items) const;

  // Run `run` is gone (or cancelled): forgets its reads, and returns the stores where one
  // is still open, by endpoint, each with the socket to release the run's objects through.
  std::map<std::string, net::Requester*> Drop(uint64_t run);

 private:
  using Key = std::pair<uint64_t, uint32_t>;  // (object, shard)
  struct Read {
    uint64_t run = 0;
    net::Requester* socket = nullptr;
    uint64_t request = 0;
    uint64_t bytes = 0;
    std::optional<proto::Incoming> reply;
  };

  Result<net::Requester*> Socket(const std::string& store);
  void Answer(net::Requester* socket, proto::Incoming in);
  void Forget(std::map<Key, Read>::iterator read);

  zmq::context_t& context_;
  std::map<std::string, std::unique_ptr<net::Requester>> sockets_;  // by store endpoint
  std::map<uint64_t, std::vector<Shard>> unread_;                   // by run, not read ahead
  std::map<Key, Read> reads_;                                       // sent, open or answered
  std::map<std::pair<net::Requester*, uint64_t>, Key> by_request_;  // open ones
  std::map<uint64_t, std::vector<Key>> runs_;                       // reads_ keys, by run
  uint64_t bytes_ = 0;                                              // of reads_
};

}  // namespace atl
