// TupleOutbox: the sending half of the executors' data plane. Tuples bound for another
// host queue in one batch per destination, in the order they were added, and go as one
// TupleBatch message (header, then one data frame per tuple) once the batch is due:
//
//   - it holds `batch_bytes` of tensor data, or a tuple that big (a large tensor goes at
//     once, after the small ones queued before it, in the same message);
//   - its oldest tuple has waited the window (`batch_window_us`), or the window is 0;
//   - a latency-critical tuple (a collective partial) is in it.
//
// Flush() sends what is due; the owner calls it at the end of every loop turn and when
// timer_fd() (a timerfd armed for the next batch to fall due) becomes readable.
//
// A batch that a peer's full queue refuses (it has not read its data socket for a while:
// 1,000 messages there and 1,000 here, past the kernel's buffers) is kept, encoded, and so
// is every later batch for that peer, in order; they are tried again on the timer (every 1
// to 100 ms, backing off) until the peer takes them. Only when the peer took nothing for
// `hold_limit` are they dropped and reported: their consumers have given up on them by
// then (the executor passes its input_wait_ms), or once the RM declares the peer lost
// (PeerLost). A send is tried first and a batch kept only when refused (net::TrySend), so
// a peer with room costs no look at its queue.
//
// Tensor data is never copied into the msgpack header: small tensors share one frame, a
// large tensor's frame borrows its bytes (ZeroMQ frees them once sent); see tuple_frames.h.
//
// Not thread-safe: used by the loop thread that owns the peer sockets.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "atoll/tensor.h"
#include "common/net/transport.h"
#include "common/proto/protocol.h"
#include "common/service/config.h"
#include "services/executor/tuple_frames.h"

namespace atl::executor {

class TupleOutbox {
 public:
  // Cumulative counts since start, published as `dataplane.stats`.
  struct Stats {
    uint64_t tuples = 0;
    uint64_t batches = 0;  // TupleBatch messages sent
    uint64_t bytes = 0;    // tensor bytes
  };

  TupleOutbox(zmq::context_t& context, const DataPlaneConfig& config,
              std::chrono::milliseconds hold_limit = std::chrono::minutes(10));
  ~TupleOutbox();
  TupleOutbox(const TupleOutbox&) = delete;
  TupleOutbox& operator=(const TupleOutbox&) = delete;

  // Creates the timer; fails when the kernel refuses a timerfd.
  Status Start();
  int timer_fd() const { return timer_fd_; }

  // Queues a tuple for the executor whose data plane is `endpoint`. A failed value travels
  // as its error, with an empty frame. `urgent`: send this destination's batch at the next
  // Flush, whatever the window.
  void Add(const std::string& endpoint, proto::TupleHeader header, Result<Tensor> value,
           bool urgent);

  // Sends every batch that is due and its peer takes, and re-arms the timer for the next one
  // or the next try. Returns an error per batch dropped: its peer is not an endpoint; or,
  // one for all its held batches, it took nothing for hold_limit (its consumers' waits are
  // bounded).
  std::vector<Status> Flush();

  // The executor at `endpoint` is lost: its runs here are failed already, so the tuples
  // queued or held for it are dropped now, not tried until hold_limit. Returns how many.
  uint64_t PeerLost(const std::string& endpoint);

  const Stats& stats() const { return stats_; }
  // Batches held for peers whose queue is full.
  size_t held() const;

 private:
  struct Held {
    net::Frames frames;  // header, then data
    uint64_t tuples = 0;
    uint64_t bytes = 0;
  };
  struct Batch {
    proto::TupleBatch message;
    TupleFrames frames;
    uint64_t bytes = 0;
    bool urgent = false;
    std::chrono::steady_clock::time_point first;  // when the oldest tuple was queued
    // Earlier batches the peer's full queue refused, as they go on the wire, oldest first,
    // and since when (kNever while none is held).
    std::deque<Held> held;
    std::chrono::steady_clock::time_point held_since = kNever;
  };
  bool Due(const Batch& batch, std::chrono::steady_clock::time_point now) const;
  // Sends `batch`'s held messages, oldest first, while the peer takes them; then, when
  // `due`, its queued tuples, or holds them when the peer refuses them or older ones wait.
  // Adds an error for what it dropped.
  void Send(const std::string& endpoint, Batch& batch, bool due,
            std::chrono::steady_clock::time_point now, std::vector<Status>& errors);
  // The batch's queued tuples as they go on the wire; leaves the batch empty.
  static Held Encode(Batch& batch);
  void CountSent(const Held& message);
  // When to look at `batch` next: its window's end, or its next try while it is held.
  std::chrono::steady_clock::time_point NextLook(const Batch& batch,
                                                 std::chrono::steady_clock::time_point now) const;
  void ArmTimer(std::chrono::steady_clock::time_point now);

  static constexpr auto kNever = std::chrono::steady_clock::time_point::max();
  static constexpr auto kDisarmed = kNever;

  DataPlaneConfig config_;
  std::chrono::microseconds window_;
  std::chrono::milliseconds hold_limit_;
  net::DealerPool peers_;  // to other executors' data planes
  std::map<std::string, Batch> batches_;
  int timer_fd_ = -1;
  std::chrono::steady_clock::time_point armed_for_ = kDisarmed;  // when the timer fires
  Stats stats_;
};

}  // namespace atl::executor
