// The ZeroMQ wrapper: the only place where cppzmq exceptions are caught. Every call
// returns a Status; EAGAIN and timeouts are ordinary outcomes (an empty optional or
// DeadlineExceeded), not errors.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "atoll/status.h"
#include "common/net/handshake_watch.h"
#include "common/net/rejection_log.h"
#include "common/net/security.h"
#include "common/net/sent_counters.h"
#include "common/proto/codec.h"

namespace atl::net {

using Frames = std::vector<zmq::message_t>;

// Largest message a service accepts; bigger ones make ZeroMQ drop the connection instead
// of buffering them. 1 GiB.
inline constexpr int64_t kDefaultMaxMessageBytes = int64_t{1} << 30;

// Makes a socket with atoll's defaults: no linger on close, mandatory routing on ROUTER
// sockets (an unknown peer is an error, not a silent drop), a bounded send wait, and the
// CURVE keys the context was given (security.h), if any.
zmq::socket_t MakeSocket(zmq::context_t& context, zmq::socket_type type);

// Binds to `endpoint`; a port of "*" or "0" picks a free port. Returns the bound address.
// A socket with CURVE keys becomes a CURVE server whose peers the process's ZAP handler
// checks against `audience`. ZeroMQ 4.3 accepts every key when the context has no ZAP
// handler (enforcing one is a draft option), so a service starts its handler before it
// binds anything (SecureService, common/service/service_main.h).
Result<std::string> Bind(zmq::socket_t& socket, const std::string& endpoint,
                         Audience audience = Audience::kEveryone);
Status Connect(zmq::socket_t& socket, const std::string& endpoint);

// Sends all frames as one multipart message.
Status SendFrames(zmq::socket_t& socket, Frames& frames);
// Receives one multipart message, waiting at most `timeout` (0: do not wait).
// An empty optional means nothing arrived in time.
Result<std::optional<Frames>> RecvFrames(zmq::socket_t& socket, std::chrono::milliseconds timeout);

// Waits at most `timeout` until one of `items` is ready (zmq::poll, which sets their
// revents). A wait a signal interrupts returns OK early, with nothing ready.
Status Poll(std::vector<zmq::pollitem_t>& items, std::chrono::milliseconds timeout);

// Sends `frames` as one multipart message and counts it as one message of `kind` (see
// sent_counters.h), of every frame's bytes from `first_counted` on (past the routing id).
Status SendCounted(zmq::socket_t& socket, Frames& frames, proto::Kind kind, size_t first_counted);

// Sends a message [routing id?][header(body)][data...].
template <typename T>
Status Send(zmq::socket_t& socket, const zmq::message_t* routing_id, uint64_t request_id,
            const T& body, Frames data = {}) {
  Frames frames;
  frames.reserve(data.size() + 2);
  if (routing_id != nullptr) frames.emplace_back(routing_id->data(), routing_id->size());
  frames.push_back(proto::EncodeHeader(request_id, body));
  for (auto& d : data) frames.push_back(std::move(d));
  return SendCounted(socket, frames, T::kKind, routing_id != nullptr ? 1 : 0);
}

// Replies on a ROUTER socket to `to` with a body or an error.
template <typename T>
Status Reply(zmq::socket_t& socket, const proto::Incoming& to, const T& body, Frames data = {}) {
  return Send(socket, to.routing_id ? &*to.routing_id : nullptr, to.header.request_id(), body,
              std::move(data));
}
Status ReplyError(zmq::socket_t& socket, const proto::Incoming& to, const Status& status);

// Receives one request from a ROUTER socket without waiting. A message that does not parse
// (garbage, truncated, unknown kind or version) is answered with an Error reply to its
// sender and comes back as that Status; an empty optional means nothing was waiting.
// `sender`, when given, is set to the routing id of the message received, parsed or not.
Result<std::optional<proto::Incoming>> RecvRequest(zmq::socket_t& router,
                                                   std::string* sender = nullptr);

// DEALER sockets to peers (executors, schedulers, object stores) by endpoint, each
// connected on first use and kept. Used from one thread: a service's loop. A send to a
// peer whose queue is full (1,000 messages: a peer gone, or not reading) fails at once
// rather than wait: one such peer must never stall the loop, whose heartbeats would stop
// with it and get the whole service declared lost.
class DealerPool {
 public:
  explicit DealerPool(zmq::context_t& context) : context_(context) {}
  Result<zmq::socket_t*> Get(const std::string& endpoint);

 private:
  zmq::context_t& context_;
  std::map<std::string, zmq::socket_t> sockets_;
};

// Synchronous request/reply over a DEALER socket owned by the calling thread. Replies to
// earlier requests that timed out are skipped by request id. An Error reply becomes the
// returned Status.
class Requester {
 public:
  Requester(zmq::context_t& context, std::string endpoint);
  // Connects; with `watch_handshakes`, a failed security handshake (the peer refused this
  // process's key) ends each Call at once with PermissionDenied instead of its timeout, and
  // a Call that times out while no connection is up fails with Unavailable (the peer is down
  // or unreachable) rather than DeadlineExceeded.
  Status Connect(bool watch_handshakes = false);
  const std::string& endpoint() const { return endpoint_; }
  // The DEALER itself, for a service that polls it in its loop once setup calls are done.
  zmq::socket_t& socket() { return socket_; }

  // `kind` is the request's, for the sent-message counters.
  Result<proto::Incoming> Call(uint64_t request_id, zmq::message_t header, Frames data,
                               std::chrono::milliseconds timeout,
                               proto::Kind kind = proto::Kind{0});

  template <typename Reply, typename Request>
  Result<Reply> Call(const Request& request, std::chrono::milliseconds timeout, Frames data = {},
                     Frames* reply_data = nullptr) {
    const uint64_t id = ++next_request_id_;
    ATOLL_ASSIGN_OR_RETURN(proto::Incoming in, Call(id, proto::EncodeHeader(id, request),
                                                    std::move(data), timeout, Request::kKind));
    if (in.header.kind() == proto::Kind::kError) {
      ATOLL_ASSIGN_OR_RETURN(proto::Error err, in.header.As<proto::Error>());
      return proto::FromError(err);
    }
    if (reply_data != nullptr) *reply_data = std::move(in.data);
    return in.header.As<Reply>();
  }

  // For a watched peer (Connect with watch_handshakes): PermissionDenied once it refused
  // this process's key, Unavailable while no connection is up; OK otherwise, and always for
  // a peer not watched. For callers that collect replies themselves (Send).
  Status Reachable();
  // For a watched peer: how many established connections to it dropped (HandshakeWatch::
  // Drops); 0 for a peer not watched.
  uint64_t ConnectionDrops();

  // Sends a request whose reply the caller collects itself from socket(); returns its
  // request id. Do not mix with Call() on the same Requester: Call skips other replies.
  template <typename Request>
  Result<uint64_t> Send(const Request& request, Frames data = {}) {
    const uint64_t id = ++next_request_id_;
    ATOLL_RETURN_IF_ERROR(net::Send(socket_, nullptr, id, request, std::move(data)));
    return id;
  }

  // Sends without waiting for any reply (heartbeats, goodbyes).
  template <typename Request>
  Status Post(const Request& request, Frames data = {}) {
    return net::Send(socket_, nullptr, ++next_request_id_, request, std::move(data));
  }

  // The messages the peer sent on its own (request id 0, e.g. the RM's SliceRemapped), in
  // arrival order: those Call() met while waiting for its reply, then those waiting on the
  // socket. Never waits; late replies to old requests are dropped.
  std::vector<proto::Incoming> TakeNotices();
  // The errors the peer answered since the last call (for a service that only posts to it,
  // such as heartbeats), each logged by LogError; never waits. Other messages are dropped.
  std::vector<Status> TakeErrors();
  // Logs an error the peer answered as a warning, at most one line a second (the rest
  // counted, see rejection_log.h): a peer refusing every heartbeat does not flood the log.
  void LogError(const Status& error);

 private:
  zmq::context_t& context_;
  std::string endpoint_;
  zmq::socket_t socket_;
  std::unique_ptr<HandshakeWatch> handshakes_;  // null: not watched
  uint64_t next_request_id_ = 0;
  std::vector<proto::Incoming> notices_;
  RejectionLog errors_{{.verb = "got", .one = "error reply", .many = "error replies"}};
};

}  // namespace atl::net
