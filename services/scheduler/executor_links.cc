#include "services/scheduler/executor_links.h"

#include "common/net/try_send.h"

namespace atl::scheduler {

Result<zmq::socket_t*> ExecutorLinks::Socket(const std::string& endpoint) {
  auto it = sockets_.find(endpoint);
  if (it != sockets_.end()) return &it->second;
  zmq::socket_t socket = net::MakeSocket(context_, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::sndtimeo, 0);
  socket.set(zmq::sockopt::sndhwm, kQueueMessages);
  ATOLL_RETURN_IF_ERROR(net::Connect(socket, endpoint));
  return &sockets_.emplace(endpoint, std::move(socket)).first->second;
}

Status ExecutorLinks::Send(const std::string& endpoint, Message message) {
  ATOLL_ASSIGN_OR_RETURN(zmq::socket_t * socket, Socket(endpoint));
  auto held = held_.find(endpoint);
  // A message never overtakes one held before it.
  if (held == held_.end()) {
    ATOLL_ASSIGN_OR_RETURN(const bool went, net::TrySend(*socket, message.frames, message.kind));
    if (went) return Status::Ok();
    held = held_.emplace(endpoint, std::deque<Message>()).first;
  }
  held->second.push_back(std::move(message));
  held_count_++;
  return Status::Ok();
}

void ExecutorLinks::Retry() {
  for (auto it = held_.begin(); it != held_.end();) {
    auto socket = Socket(it->first);  // made when the first message was held
    std::deque<Message>& queue = it->second;
    while (socket.ok() && !queue.empty()) {
      Message& next = queue.front();
      // A held message is whole (ZeroMQ refused its first frame), so an error cannot come
      // from it half sent: it goes, or waits for room.
      Result<bool> went = net::TrySend(**socket, next.frames, next.kind);
      if (went.ok() && !*went) break;
      queue.pop_front();
      held_count_--;
    }
    it = queue.empty() ? held_.erase(it) : std::next(it);
  }
}

size_t ExecutorLinks::Drop(const std::string& endpoint) {
  auto it = held_.find(endpoint);
  if (it == held_.end()) return 0;
  const size_t dropped = it->second.size();
  held_count_ -= dropped;
  held_.erase(it);
  return dropped;
}

}  // namespace atl::scheduler
