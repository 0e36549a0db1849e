// PendingWork: the RM's work that waits on executors, and the requests answered once it is
// done. Three kinds, each under an RM request id of its own (the id the executors'
// Compile answers carry):
//   a registration  RegisterFunction, answered once every executor of its slice compiled
//                   the function, or one failed, or the compile timeout passed;
//   a remap         a slice moved off a lost or drained host, whose client is told once its
//                   functions compiled on the new mapping (or failed, or timed out);
//   a drain         DrainHost, answered once each slice it moved was remapped.
// Only the bookkeeping: what a finished one means (a reply, an event) is the controller's.
//
// Pure: the caller passes `now`. Not thread-safe: the RM's loop owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/proto/protocol.h"

namespace atl::rm {

class PendingWork {
 public:
  using Clock = std::chrono::steady_clock;

  struct Registration {
    std::string client_routing_id;
    uint64_t client_request_id = 0;
    uint64_t function_id = 0;
    size_t acks_missing = 0;
    Clock::time_point deadline;
  };
  struct Remap {
    uint64_t slice = 0;
    std::string reason;
    size_t acks_missing = 0;
    Clock::time_point deadline;
    uint64_t drain = 0;  // the drain that waits for it; 0: none
  };
  struct Drain {
    std::string routing_id;  // of the member that asked
    uint64_t request_id = 0;
    size_t steps_missing = 0;  // remaps, and the drain's own pass
    proto::DrainHostReply reply;
  };

  // Compiles not answered `compile_timeout` after they were sent fail.
  explicit PendingWork(Clock::duration compile_timeout) : compile_timeout_(compile_timeout) {}

  // A new RM request id, for compiles that nothing waits for as well.
  uint64_t NewRequestId() { return next_request_id_++; }

  // Starts a registration under `id` (from NewRequestId) waiting for `acks` answers (at
  // least one).
  void AddRegistration(uint64_t id, std::string client_routing_id, uint64_t client_request_id,
                       uint64_t function_id, size_t acks, Clock::time_point now);
  // Starts a remap under `id` (from NewRequestId) waiting for `acks` answers. With none to
  // wait for it is finished at once: returned, not kept.
  std::optional<Remap> AddRemap(uint64_t id, uint64_t slice, std::string reason, size_t acks,
                                uint64_t drain, Clock::time_point now);

  // One executor answered the compile of RM request `id` (`failed`: with an error). Returns
  // the registration or remap it finished (one failure finishes it), no longer kept;
  // nothing when it waits for more, or `id` is not pending (a late answer).
  std::optional<Registration> RegistrationAnswered(uint64_t id, bool failed);
  std::optional<Remap> RemapAnswered(uint64_t id, bool failed);
  // The registrations and remaps whose deadline passed at `now`, in id order, no longer kept.
  std::vector<Registration> ExpiredRegistrations(Clock::time_point now);
  std::vector<Remap> ExpiredRemaps(Clock::time_point now);

  // Starts a drain answered to `routing_id`'s request `request_id`, with one step for its
  // own pass (so that remaps finishing within it cannot answer it early); returns its id.
  uint64_t StartDrain(std::string routing_id, uint64_t request_id);
  // The drain's pass moved slice `slice` (a remap to wait for) or had to keep it where it is.
  void DrainMoved(uint64_t drain, uint64_t slice);
  void DrainKept(uint64_t drain, uint64_t slice);
  const proto::DrainHostReply& DrainReply(uint64_t drain) const { return drains_.at(drain).reply; }
  // One step of drain `drain` is done: returns the drain once none is left, no longer kept.
  std::optional<Drain> DrainStepDone(uint64_t drain);

  size_t registrations() const { return registrations_.size(); }
  size_t remaps() const { return remaps_.size(); }
  size_t drains() const { return drains_.size(); }

 private:
  Clock::duration compile_timeout_;
  uint64_t next_request_id_ = 1;
  std::map<uint64_t, Registration> registrations_;  // by RM request id
  std::map<uint64_t, Remap> remaps_;
  std::map<uint64_t, Drain> drains_;
};

}  // namespace atl::rm
