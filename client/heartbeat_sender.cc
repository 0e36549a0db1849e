#include "client/heartbeat_sender.h"

#include <tuple>

#include "common/net/transport.h"

namespace atl {

namespace {

using Clock = std::chrono::steady_clock;

// Beats queued on one connection while it is down or slow, past which new ones are dropped:
// room for a whole period of thousands of clients, bounded while a service is gone.
constexpr int kQueuedBeats = 65536;

}  // namespace

std::shared_ptr<HeartbeatSender> HeartbeatSender::Shared(const net::Credentials& credentials,
                                                         std::chrono::milliseconds period) {
  using Key = std::tuple<std::string, std::string, int64_t>;
  static Mutex mu;
  // Never destroyed: a client may outlive static destruction.
  static auto* senders = new std::map<Key, std::weak_ptr<HeartbeatSender>>();
  MutexLock lock(mu);
  std::erase_if(*senders, [](const auto& entry) { return entry.second.expired(); });
  std::weak_ptr<HeartbeatSender>& slot =
      (*senders)[Key{credentials.own.public_key, credentials.server_key, period.count()}];
  if (auto sender = slot.lock()) return sender;
  auto sender = std::make_shared<HeartbeatSender>(credentials, period);
  slot = sender;
  return sender;
}

HeartbeatSender::HeartbeatSender(net::Credentials credentials, std::chrono::milliseconds period)
    : context_(std::move(credentials)), period_(period), thread_([this] { Loop(); }) {}

HeartbeatSender::~HeartbeatSender() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HeartbeatSender::Add(uint64_t client, const std::string& endpoint) {
  {
    MutexLock lock(mu_);
    if (!beats_.emplace(client, endpoint).second) return;
    first_.emplace_back(client, endpoint);
  }
  cv_.notify_all();
}

void HeartbeatSender::Remove(uint64_t client) {
  MutexLock lock(mu_);
  std::erase_if(beats_, [&](const auto& beat) { return beat.first == client; });
  std::erase_if(first_, [&](const auto& beat) { return beat.first == client; });
}

void HeartbeatSender::Loop() {
  MutexLock lock(mu_);
  auto next = Clock::now() + period_;
  while (true) {
    // The condition calls the predicate with mu_ held, which the analysis cannot see.
    cv_.wait_until(lock.native(), next,
                   [&]() NO_THREAD_SAFETY_ANALYSIS { return stop_ || !first_.empty(); });
    if (stop_) break;
    for (const auto& [client, endpoint] : std::exchange(first_, {})) Beat(client, endpoint);
    const auto now = Clock::now();
    if (now < next) continue;
    for (const auto& [client, endpoint] : beats_) Beat(client, endpoint);
    // A sender that fell behind (a stopped process) beats once, not once per period missed.
    next += period_;
    if (next <= now) next = now + period_;
  }
  sockets_.clear();  // sockets close on the thread that used them
}

void HeartbeatSender::Beat(uint64_t client, const std::string& endpoint) {
  auto it = sockets_.find(endpoint);
  if (it == sockets_.end()) {
    zmq::socket_t socket = net::MakeSocket(context_, zmq::socket_type::dealer);
    // Replies (errors about unknown clients) are of no use here; never queue them.
    socket.set(zmq::sockopt::rcvhwm, 1);
    socket.set(zmq::sockopt::sndhwm, kQueuedBeats);
    socket.set(zmq::sockopt::sndtimeo, 0);
    if (!net::Connect(socket, endpoint).ok()) return;
    it = sockets_.emplace(endpoint, std::move(socket)).first;
  }
  (void)net::Send(it->second, nullptr, 0,
                  proto::Heartbeat{proto::Heartbeat::kClient, std::to_string(client)});
}

}  // namespace atl
