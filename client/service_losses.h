// ServiceLosses: the losses a client knows of, and the connections it watches. The RM
// announces a service lost or back (ServiceChanged); a scheduler's or object store's
// dropped connection counts as a loss at once, without waiting for the RM's notice, which
// comes a liveness window later (and which a client misses while the RM itself restarts).
// A run fails for the first loss, announced after its submission, of a service it needs
// (LossFor); a submission that needs a service lost now is refused (CheckUp).
//
// Pure bookkeeping, no sockets: Client::Impl reads the RM's notices and the peers'
// connection counters and hands them in. Not thread-safe: the Client's thread owns it.
//
// Example:
//   if (const Loss* lost = losses.Notice(changed)) ...;       // a ServiceChanged from the RM
//   if (losses.Dropped(endpoint, peer.ConnectionDrops())) losses.Lose(...);
//   if (const Loss* loss = losses.LossFor(run.needs, run.losses_seen)) ... fail the run
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "atoll/status.h"
#include "common/proto/protocol.h"

namespace atl {

// A service lost: declared by the RM (ServiceChanged) or seen by its dropped connection.
struct Loss {
  uint8_t role = 0;  // proto::Heartbeat::Role
  std::string name;  // the host, for executors and stores; the island, for schedulers
  std::string endpoint;
  std::string reason;
};

// The services a run needs: the loss of any of them fails it, naming the service.
struct ServicesNeeded {
  std::set<std::string> schedulers;  // endpoints
  std::set<std::string> stores;      // endpoints
  std::set<std::string> hosts;       // names: their executors run its shards

  void Add(const ServicesNeeded& more);
  bool Needs(const Loss& loss) const;
};

class ServiceLosses {
 public:
  // A ServiceChanged from the RM: a loss is recorded and returned (for the caller's other
  // bookkeeping), a return ends the service's being down; null for a return.
  const Loss* Notice(const proto::ServiceChanged& changed);
  // Records a loss: the runs submitted before it that need the service fail (LossFor).
  const Loss& Lose(Loss loss);
  // The loss of the peer at `endpoint`, called `who` ("the object store of host h0 (...)"),
  // whose connection dropped. Not `down`: it may be back at once, and the RM says when not.
  static Loss DroppedConnection(uint8_t role, std::string name, std::string endpoint,
                                const std::string& who);

  // Whether the peer at `endpoint`, whose connection dropped `drops` times so far, dropped
  // since the last look (the first look counts drops from zero).
  bool Dropped(const std::string& endpoint, uint64_t drops);
  // Whether the object stores' connections are due a look at `now`: once a notice period.
  bool StoresDue(std::chrono::steady_clock::time_point now);

  // The first loss since `seen` losses were known of a service `needs` names; null if none.
  const Loss* LossFor(const ServicesNeeded& needs, size_t seen) const;
  // Unavailable naming a service `needs` names that is down now ("run N: ..."); OK if none.
  Status CheckUp(uint64_t run, const ServicesNeeded& needs) const;
  // Losses known so far: a run submitted now records it as what it has seen.
  size_t seen() const { return losses_.size(); }

  // How often a wait looks for the RM's notices: a quarter of a heartbeat period, so that a
  // loss fails the runs that need the service well within a period of its declaration.
  std::chrono::milliseconds notice_period{25};

 private:
  std::vector<Loss> losses_;  // every loss so far, in order
  // The services lost now, until they are back, by (role, name).
  std::map<std::pair<uint8_t, std::string>, Loss> down_;
  std::map<std::string, uint64_t> connection_drops_;  // by endpoint, at the last look
  std::chrono::steady_clock::time_point stores_watched_;
};

}  // namespace atl
