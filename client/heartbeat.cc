#include "client/heartbeat.h"

#include <map>

#include "common/net/transport.h"

namespace atl {

HeartbeatThread::HeartbeatThread(zmq::context_t& context, std::string rm_endpoint)
    : context_(context), rm_endpoint_(std::move(rm_endpoint)), thread_([this] { Loop(); }) {}

HeartbeatThread::~HeartbeatThread() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HeartbeatThread::Start(uint64_t client_id, std::chrono::milliseconds period) {
  {
    MutexLock lock(mu_);
    client_id_ = client_id;
    period_ = period;
  }
  cv_.notify_all();
}

void HeartbeatThread::AddWatcher(const std::string& endpoint) {
  MutexLock lock(mu_);
  watchers_.insert(endpoint);
}

void HeartbeatThread::Loop() {
  // Sockets live and die on this thread.
  std::map<std::string, zmq::socket_t> sockets;
  auto socket_to = [&](const std::string& endpoint) -> zmq::socket_t* {
    auto it = sockets.find(endpoint);
    if (it == sockets.end()) {
      zmq::socket_t s = net::MakeSocket(context_, zmq::socket_type::dealer);
      // Replies (errors about unknown clients) are of no use here; never queue them.
      s.set(zmq::sockopt::rcvhwm, 1);
      if (!net::Connect(s, endpoint).ok()) return nullptr;
      it = sockets.emplace(endpoint, std::move(s)).first;
    }
    return &it->second;
  };
  (void)socket_to(rm_endpoint_);  // its handshake runs while the client says hello
  MutexLock lock(mu_);
  // The condition calls the predicate with mu_ held, which the analysis cannot see.
  cv_.wait(lock.native(), [&]() NO_THREAD_SAFETY_ANALYSIS { return stop_ || client_id_ != 0; });
  const proto::Heartbeat beat{proto::Heartbeat::kClient, std::to_string(client_id_)};
  const std::chrono::milliseconds period = period_;
  auto beat_to = [&](const std::string& endpoint) {
    if (zmq::socket_t* socket = socket_to(endpoint)) (void)net::Send(*socket, nullptr, 0, beat);
  };
  // The first beat goes at once: the RM counts the client's silence from its HelloClient.
  while (!stop_) {
    const std::set<std::string> watchers = watchers_;
    lock.Unlock();
    beat_to(rm_endpoint_);
    for (const auto& w : watchers) beat_to(w);
    lock.Lock();
    cv_.wait_for(lock.native(), period, [&]() NO_THREAD_SAFETY_ANALYSIS { return stop_; });
  }
}

}  // namespace atl
