// ExecutorLinks: the scheduler's messages to its executors (dispatches and cancels), in
// order per executor. Its sockets never wait: one executor that reads nothing for a while
// must not stall the island's other clients. So a message that an executor's full queue
// refuses (kQueueMessages here, past the kernel's buffers: its loop is stopped, or a burst
// outran the network) is kept as encoded (net::TrySend), and every later message for that
// executor queues behind it, in order. Retry() sends them, oldest first, as the executor
// takes them; the scheduler calls it each loop turn (the executor's reports are turns) and
// every heartbeat. They are held as long as the RM counts the executor alive: what is held
// for one declared lost is dropped (Drop), as its runs fail on the loss. The clients'
// quotas on runs in flight bound what can be held.
//
// Not thread-safe: the scheduler's loop owns it.
//
// Example:
//   ATOLL_RETURN_IF_ERROR(links.Send(endpoint, dispatch));  // sent, or held in order
//   ... each loop turn:
//   links.Retry();
//   ... the RM says the executor is lost:
//   links.Drop(endpoint);
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <string>

#include <zmq.hpp>

#include "atoll/status.h"
#include "common/net/transport.h"
#include "common/proto/codec.h"

namespace atl::scheduler {

class ExecutorLinks {
 public:
  // Messages ZeroMQ queues for one executor before the rest are held here. Few: what
  // ZeroMQ holds is neither counted (dispatches_held) nor dropped when the executor is lost,
  // and it would reach a new executor at the same address. The kernel's buffers hold more.
  static constexpr int kQueueMessages = 16;

  explicit ExecutorLinks(zmq::context_t& context) : context_(context) {}

  // The socket to the executor at `endpoint`, connected on first use: its reports come
  // back on it.
  Result<zmq::socket_t*> Socket(const std::string& endpoint);

  // Sends `body` to the executor at `endpoint`, or holds it behind what is held for it
  // already. Fails only when it can never go (`endpoint` is not one).
  template <typename T>
  Status Send(const std::string& endpoint, const T& body) {
    net::Frames frames;
    frames.push_back(proto::EncodeHeader(0, body));
    return Send(endpoint, Message{std::move(frames), T::kKind});
  }

  // Sends what is held, oldest first, for as long as each executor takes it.
  void Retry();

  // The executor at `endpoint` is lost: what is held for it is dropped. Returns how many
  // messages.
  size_t Drop(const std::string& endpoint);

  // Messages held for executors whose queue is full.
  size_t held() const { return held_count_; }

 private:
  struct Message {
    net::Frames frames;
    proto::Kind kind;
  };
  Status Send(const std::string& endpoint, Message message);

  zmq::context_t& context_;
  std::map<std::string, zmq::socket_t> sockets_;     // by executor; a send never waits
  std::map<std::string, std::deque<Message>> held_;  // by executor, oldest first
  size_t held_count_ = 0;
};

}  // namespace atl::scheduler
