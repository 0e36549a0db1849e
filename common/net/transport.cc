#include "common/net/transport.h"

#include "common/net/socket_waiter.h"

#include <algorithm>
#include <string>
#include <utility>

namespace atl::net {

namespace {
constexpr int kSendTimeoutMs = 5000;
constexpr auto kHandshakeCheck = std::chrono::milliseconds(20);
// Connections a bound socket's listener holds until its I/O thread accepts them (the kernel
// caps it at net.core.somaxconn). ZeroMQ's 100 overflowed when 256 clients connected at
// once while the I/O thread was busy with CURVE handshakes: the kernel dropped 100-250
// SYNs per such burst, each retried after 1 s, then 3 s, which delayed clients' heartbeat
// connections past the RM's liveness window.
constexpr int kListenBacklog = 4096;
}  // namespace

zmq::socket_t MakeSocket(zmq::context_t& context, zmq::socket_type type) {
  zmq::socket_t socket(context, type);
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::maxmsgsize, kDefaultMaxMessageBytes);
  if (type == zmq::socket_type::router) {
    // A service's ROUTER answers many peers from one thread: waiting on one peer that does
    // not read would stall all the others, so a reply to a peer whose queue is full fails
    // at once (and that peer's request times out on its side).
    socket.set(zmq::sockopt::router_mandatory, 1);
    socket.set(zmq::sockopt::sndtimeo, 0);
  } else {
    socket.set(zmq::sockopt::sndtimeo, kSendTimeoutMs);
  }
  if (type == zmq::socket_type::dealer) {
    // A DEALER hears answers to its own requests and notices about its own runs, so what
    // queues here is bounded by what it asked for. A bounded queue would push back into
    // the answering ROUTER, which then loses the answer (see above) whenever this process
    // reads less often than the peer answers: a burst of replies to a stream of requests.
    socket.set(zmq::sockopt::rcvhwm, 0);
  }
  if (const Credentials credentials = CredentialsOf(context); credentials.curve()) {
    socket.set(zmq::sockopt::curve_publickey, credentials.own.public_key);
    socket.set(zmq::sockopt::curve_secretkey, credentials.own.secret_key);
    socket.set(zmq::sockopt::curve_serverkey, credentials.server_key);
  }
  return socket;
}

Result<std::string> Bind(zmq::socket_t& socket, const std::string& endpoint, Audience audience) {
  if (socket.get(zmq::sockopt::mechanism) == ZMQ_CURVE) {
    socket.set(zmq::sockopt::curve_server, 1);
    socket.set(zmq::sockopt::zap_domain,
               audience == Audience::kMembers ? kZapDomainMembers : kZapDomainEveryone);
  }
  std::string target = endpoint;
  if (target.size() > 2 && target.compare(target.size() - 2, 2, ":0") == 0) {
    target.replace(target.size() - 1, 1, "*");
  }
  socket.set(zmq::sockopt::backlog, kListenBacklog);
  SocketWaiter::NoteUse(socket.handle(), false);
  try {
    socket.bind(target);
    return socket.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Unavailable("cannot bind " + endpoint + ": " + e.what());
  }
}

Status Connect(zmq::socket_t& socket, const std::string& endpoint) {
  SocketWaiter::NoteUse(socket.handle(), false);
  try {
    socket.connect(endpoint);
    return Status::Ok();
  } catch (const zmq::error_t& e) {
    return InvalidArgument("cannot connect to '" + endpoint + "': " + e.what());
  }
}

Status SendFrames(zmq::socket_t& socket, Frames& frames) {
  SocketWaiter::NoteUse(socket.handle(), false);
  try {
    for (size_t i = 0; i < frames.size(); ++i) {
      const auto flags = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
      if (!socket.send(frames[i], flags)) {
        return Unavailable("send timed out after " +
                           std::to_string(socket.get(zmq::sockopt::sndtimeo)) +
                           " ms: peer not reading");
      }
    }
    return Status::Ok();
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return Unavailable("peer is not connected");
    return Unavailable(std::string("send failed: ") + e.what());
  }
}

Status SendCounted(zmq::socket_t& socket, Frames& frames, proto::Kind kind, size_t first_counted) {
  uint64_t bytes = 0;
  for (size_t i = first_counted; i < frames.size(); ++i) bytes += frames[i].size();
  Status sent = SendFrames(socket, frames);
  if (sent.ok()) CountSent(kind, bytes);
  return sent;
}

Status Poll(std::vector<zmq::pollitem_t>& items, std::chrono::milliseconds timeout) {
  for (const auto& item : items) {
    if (item.socket != nullptr) SocketWaiter::NoteUse(item.socket, false);
  }
  try {
    zmq::poll(items.data(), items.size(), timeout);
    return Status::Ok();
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return Status::Ok();
    if (e.num() == ETERM) return Cancelled("context terminated");
    return Unavailable(std::string("poll failed: ") + e.what());
  }
}

Result<std::optional<Frames>> RecvFrames(zmq::socket_t& socket, std::chrono::milliseconds timeout) {
  // Finding nothing leaves the socket drained: its next message is announced.
  bool drained = false;
  struct Note {
    void* socket;
    const bool& drained;
    ~Note() { SocketWaiter::NoteUse(socket, drained); }
  } note{socket.handle(), drained};
  try {
    if (timeout.count() > 0) {
      zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
      drained = zmq::poll(&item, 1, timeout) == 0;
      if (drained) return std::optional<Frames>{};
    }
    Frames frames;
    while (true) {
      zmq::message_t part;
      if (!socket.recv(part, zmq::recv_flags::dontwait)) {
        drained = frames.empty();
        if (frames.empty()) return std::optional<Frames>{};
        return Internal("multipart message ended early");
      }
      const bool more = part.more();
      frames.push_back(std::move(part));
      if (!more) break;
    }
    return std::optional<Frames>(std::move(frames));
  } catch (const zmq::error_t& e) {
    if (e.num() == ETERM) return Cancelled("context terminated");
    return Unavailable(std::string("receive failed: ") + e.what());
  }
}

Status ReplyError(zmq::socket_t& socket, const proto::Incoming& to, const Status& status) {
  return Reply(socket, to, proto::ToError(status));
}

Result<std::optional<proto::Incoming>> RecvRequest(zmq::socket_t& router, std::string* sender) {
  ATOLL_ASSIGN_OR_RETURN(auto frames, RecvFrames(router, std::chrono::milliseconds(0)));
  if (!frames) return std::optional<proto::Incoming>{};
  if (sender != nullptr) *sender = (*frames)[0].to_string();
  if (frames->size() < 2) return InvalidArgument("message without routing id and header");
  zmq::message_t routing_id;
  routing_id.copy((*frames)[0]);
  auto in = proto::ParseIncoming(std::move(*frames), /*routed=*/true);
  if (!in.ok()) {
    Frames reply;
    reply.push_back(std::move(routing_id));
    reply.push_back(proto::EncodeHeader(0, proto::ToError(in.status())));
    (void)SendCounted(router, reply, proto::Kind::kError, 1);
    return in.status();
  }
  return std::optional<proto::Incoming>(std::move(in).value());
}

Result<zmq::socket_t*> DealerPool::Get(const std::string& endpoint) {
  auto it = sockets_.find(endpoint);
  if (it != sockets_.end()) return &it->second;
  zmq::socket_t socket = MakeSocket(context_, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::sndtimeo, 0);
  ATOLL_RETURN_IF_ERROR(Connect(socket, endpoint));
  return &sockets_.emplace(endpoint, std::move(socket)).first->second;
}

Requester::Requester(zmq::context_t& context, std::string endpoint)
    : context_(context),
      endpoint_(std::move(endpoint)),
      socket_(MakeSocket(context, zmq::socket_type::dealer)) {}

Status Requester::Connect(bool watch_handshakes) {
  if (watch_handshakes)
    handshakes_ = std::make_unique<HandshakeWatch>(context_, socket_, endpoint_);
  return net::Connect(socket_, endpoint_);
}

Result<proto::Incoming> Requester::Call(uint64_t request_id, zmq::message_t header, Frames data,
                                        std::chrono::milliseconds timeout, proto::Kind kind) {
  Frames frames;
  frames.push_back(std::move(header));
  for (auto& d : data) frames.push_back(std::move(d));
  ATOLL_RETURN_IF_ERROR(SendCounted(socket_, frames, kind, 0).WithContext(endpoint_));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      const std::string no_reply =
          "no reply from " + endpoint_ + " within " + std::to_string(timeout.count()) + " ms";
      // A watched peer never reached is down (or unreachable), not slow.
      if (handshakes_ && !handshakes_->Connected()) {
        return Unavailable(no_reply + ": not connected (the service is down or unreachable)");
      }
      return DeadlineExceeded(no_reply);
    }
    if (handshakes_) {
      if (auto failed = handshakes_->Failure()) return *failed;
    }
    // Watching handshakes: look again every kHandshakeCheck.
    const auto wait = handshakes_ ? std::min(left, kHandshakeCheck) : left;
    ATOLL_ASSIGN_OR_RETURN(auto got, RecvFrames(socket_, wait));
    if (!got) continue;
    auto in = proto::ParseIncoming(std::move(*got), /*routed=*/false);
    if (!in.ok()) return in.status().WithContext("reply from " + endpoint_);
    // Request id 0 is a notice, unless asked for: the error reply to a header the peer could
    // not read carries id 0 too.
    if (in->header.request_id() == request_id) return std::move(in).value();
    if (in->header.request_id() == 0) notices_.push_back(std::move(in).value());
    // Anything else is a late reply to an old request.
  }
}

Status Requester::Reachable() {
  if (!handshakes_) return Status::Ok();
  if (auto failed = handshakes_->Failure()) return *failed;
  if (!handshakes_->Connected()) {
    return Unavailable(endpoint_ + ": not connected (the service is down or unreachable)");
  }
  return Status::Ok();
}

uint64_t Requester::ConnectionDrops() { return handshakes_ ? handshakes_->Drops() : 0; }

std::vector<proto::Incoming> Requester::TakeNotices() {
  while (true) {
    auto got = RecvFrames(socket_, std::chrono::milliseconds(0));
    if (!got.ok() || !got->has_value()) break;
    auto in = proto::ParseIncoming(std::move(**got), /*routed=*/false);
    if (in.ok() && in->header.request_id() == 0) notices_.push_back(std::move(in).value());
  }
  return std::exchange(notices_, {});
}

std::vector<Status> Requester::TakeErrors() {
  std::vector<Status> errors;
  while (true) {
    auto got = RecvFrames(socket_, std::chrono::milliseconds(0));
    if (!got.ok() || !got->has_value()) break;
    auto in = proto::ParseIncoming(std::move(**got), /*routed=*/false);
    if (!in.ok() || in->header.kind() != proto::Kind::kError) continue;
    auto error = in->header.As<proto::Error>();
    errors.push_back(error.ok() ? proto::FromError(*error) : error.status());
    LogError(errors.back());
  }
  errors_.Flush();
  return errors;
}

void Requester::LogError(const Status& error) { errors_.Reject(endpoint_, error); }

}  // namespace atl::net
