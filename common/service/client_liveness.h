// ClientLiveness: when each client was last heard from, and which went silent for longer
// than the lapse (heartbeat period * liveness). One table for every service that tracks its
// clients: the RM drops a silent client and frees its slices, a scheduler cancels its runs,
// a store collects its objects. What counts as hearing from a client (a heartbeat, a
// submission, a goodbye) is the service's to say.
//
// Clients heartbeat the RM alone; the stores and schedulers follow the RM's table of its
// live clients (OwnersKnown::alive_clients, told each heartbeat period: FollowTable,
// TableHeard). A client then opens one connection for its beats, not one per service it
// uses: under CURVE each connection is a handshake and keys in locked memory (issue 48).
// While the table is late (the RM restarting, stalled or cut off), nobody is judged: the RM
// is what judges clients, and its silence says nothing of theirs.
//
// Pure: the caller passes `now`, so that a test moves time by hand. Not thread-safe: one
// per service loop.
//
// Example:
//   ClientLiveness clients(heartbeat * liveness);
//   clients.Heard(id, now);  // on each heartbeat
//   for (uint64_t id : clients.TakeSilent(now)) DropClient(id);  // on the liveness timer
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <vector>

namespace atl {

class ClientLiveness {
 public:
  using Clock = std::chrono::steady_clock;

  // A client silent for longer than `lapse` is silent; exactly `lapse` is not yet.
  explicit ClientLiveness(Clock::duration lapse) : lapse_(lapse) {}

  // Client `id` was heard from at `now`: tracked from then on (a new one) or again.
  void Heard(uint64_t id, Clock::time_point now);
  // Every tracked client was heard from at `now`: a restarted service gives each the full
  // lapse to be heard again.
  void HeardAll(Clock::time_point now);
  // Stops tracking client `id` (it said goodbye, or was dropped); nothing if not tracked.
  void Forget(uint64_t id);
  bool Tracks(uint64_t id) const { return last_heard_.count(id) > 0; }
  size_t size() const { return last_heard_.size(); }

  // The tracked clients silent at `now`, in id order; still tracked.
  std::vector<uint64_t> Silent(Clock::time_point now) const;
  // The same, no longer tracked: each is reported once. Nobody while a followed table is
  // late, and every tracked client is then heard at `now`.
  std::vector<uint64_t> TakeSilent(Clock::time_point now);

  // From `now` on, judges silences only while the RM's table came within `late` (two
  // heartbeat periods, say).
  void FollowTable(Clock::duration late, Clock::time_point now);
  // The RM's table at `now`: each tracked client in `alive` is heard (the others are the
  // clients of other services: not tracked here). After a late table, every tracked client
  // is heard at `now`.
  void TableHeard(const std::vector<uint64_t>& alive, Clock::time_point now);

  Clock::duration lapse() const { return lapse_; }

 private:
  Clock::duration lapse_;
  Clock::duration table_late_ = Clock::duration::max();  // max: no table followed
  Clock::time_point table_heard_{};
  std::map<uint64_t, Clock::time_point> last_heard_;
};

}  // namespace atl
