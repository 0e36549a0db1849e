#include "client/heartbeat.h"

#include <map>

#include "common/net/transport.h"

namespace atl {

HeartbeatThread::HeartbeatThread(zmq::context_t& context, uint64_t client_id,
                                 std::string rm_endpoint, std::chrono::milliseconds period)
    : context_(context),
      client_id_(client_id),
      rm_endpoint_(std::move(rm_endpoint)),
      period_(period),
      thread_([this] { Loop(); }) {}

HeartbeatThread::~HeartbeatThread() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HeartbeatThread::AddWatcher(const std::string& endpoint) {
  MutexLock lock(mu_);
  watchers_.insert(endpoint);
}

void HeartbeatThread::Loop() {
  // Sockets live and die on this thread.
  std::map<std::string, zmq::socket_t> sockets;
  const proto::Heartbeat beat{proto::Heartbeat::kClient, std::to_string(client_id_)};
  auto beat_to = [&](const std::string& endpoint) {
    auto it = sockets.find(endpoint);
    if (it == sockets.end()) {
      zmq::socket_t s = net::MakeSocket(context_, zmq::socket_type::dealer);
      // Replies (errors about unknown clients) are of no use here; never queue them.
      s.set(zmq::sockopt::rcvhwm, 1);
      if (!net::Connect(s, endpoint).ok()) return;
      it = sockets.emplace(endpoint, std::move(s)).first;
    }
    (void)net::Send(it->second, nullptr, 0, beat);
  };
  // The first beat goes at once: the RM counts the client's silence from its HelloClient,
  // and a new socket's connection and handshake take a while on a loaded machine.
  MutexLock lock(mu_);
  do {
    const std::set<std::string> watchers = watchers_;
    lock.Unlock();
    beat_to(rm_endpoint_);
    for (const auto& w : watchers) beat_to(w);
    lock.Lock();
    // The condition calls the predicate with mu_ held, which the analysis cannot see.
  } while (
      !cv_.wait_for(lock.native(), period_, [&]() NO_THREAD_SAFETY_ANALYSIS { return stop_; }));
}

}  // namespace atl
