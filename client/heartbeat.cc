#include "client/heartbeat.h"

#include <fmt/format.h>

#include "common/net/handshake_watch.h"
#include "common/net/transport.h"

namespace atl {

namespace {

// How often the thread looks for a stop while the RM's handshake runs.
constexpr std::chrono::milliseconds kStopCheck{50};

zmq::socket_t NewBeatSocket(zmq::context_t& context) {
  zmq::socket_t socket = net::MakeSocket(context, zmq::socket_type::dealer);
  // Replies (errors about unknown clients) are of no use here; never queue them.
  socket.set(zmq::sockopt::rcvhwm, 1);
  return socket;
}

}  // namespace

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

Status HeartbeatThread::WaitConnected(std::chrono::milliseconds timeout) {
  MutexLock lock(mu_);
  const bool settled = cv_.wait_for(
      lock.native(), timeout, [&]() NO_THREAD_SAFETY_ANALYSIS { return rm_link_.has_value(); });
  if (!settled) {
    return Unavailable(fmt::format(
        "no connection to {} within {} ms: not connected (the service is down or unreachable)",
        rm_endpoint_, timeout.count()));
  }
  return *rm_link_;
}

void HeartbeatThread::Loop() {
  // The RM's socket lives and dies on this thread.
  zmq::socket_t rm = NewBeatSocket(context_);
  // Watched until its handshake is done; stop_ is looked at meanwhile.
  net::HandshakeWatch watch(context_, rm, rm_endpoint_);
  Status link = net::Connect(rm, rm_endpoint_);
  while (link.ok() && !watch.WaitConnected(kStopCheck)) {
    if (auto failed = watch.Failure()) link = *failed;
    MutexLock lock(mu_);
    if (stop_) return;
  }
  MutexLock lock(mu_);
  rm_link_ = link;
  cv_.notify_all();
  // The condition calls the predicate with mu_ held, which the analysis cannot see.
  cv_.wait(lock.native(), [&]() NO_THREAD_SAFETY_ANALYSIS { return stop_ || client_id_ != 0; });
  const proto::Heartbeat beat{proto::Heartbeat::kClient, std::to_string(client_id_)};
  const std::chrono::milliseconds period = period_;
  // The first beat goes at once: the RM counts the client's silence from its HelloClient.
  // Beats keep to their schedule however long one round of sends took.
  auto next = std::chrono::steady_clock::now();
  while (!stop_) {
    lock.Unlock();
    (void)watch.Drops();  // reads the events each reconnection adds, lest they pile up
    (void)net::Send(rm, nullptr, 0, beat);
    next = std::max(next + period, std::chrono::steady_clock::now());
    lock.Lock();
    cv_.wait_until(lock.native(), next, [&]() NO_THREAD_SAFETY_ANALYSIS { return stop_; });
  }
}

}  // namespace atl
