// ReadsLedger: the earlier runs each submitted run keeps alive because it reads their
// futures, until each island scheduler of the run said its gangs there are done (RunDone),
// or refused the run: by then every executor read what it was to read, and the earlier
// runs' objects may go once nothing else holds them. Held here, not by the run's handle, so
// that dropping a Run whose gangs are still queued does not free what they will read.
//
// Pure bookkeeping, no sockets; what it keeps alive is opaque to it. Not thread-safe: the
// Client's thread owns it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace atl {

class ReadsLedger {
 public:
  using KeepAlive = std::shared_ptr<const void>;

  // Run `run` reads `reads` until each of `schedulers` is done with it. Holds nothing when
  // `schedulers` is empty (no executor reads for it).
  void Hold(uint64_t run, const std::set<std::string>& schedulers, std::vector<KeepAlive> reads);
  // `scheduler` is done with `run` (a RunDone, or it refused the run). Returns what the run
  // held once that was the last of its schedulers, for the caller to drop; an unknown run
  // or a scheduler already heard from gives nothing.
  std::vector<KeepAlive> Done(const std::string& scheduler, uint64_t run);
  // `scheduler` was lost: no RunDone will come from it, and the runs it had fail. Counts as
  // its RunDone for every run; returns what runs held once it was their last scheduler.
  std::vector<KeepAlive> Lost(const std::string& scheduler);
  // Whether some run still waits for `scheduler`'s RunDone.
  bool Awaits(const std::string& scheduler) const { return awaited_.count(scheduler) > 0; }
  // Runs still holding reads.
  size_t runs() const { return runs_.size(); }
  // Everything held (the client is closing), for the caller to drop.
  std::vector<KeepAlive> TakeAll();

 private:
  struct Held {
    std::set<std::string> schedulers;  // not done yet
    std::vector<KeepAlive> reads;
  };
  std::map<uint64_t, Held> runs_;
  std::map<std::string, size_t> awaited_;  // per scheduler: runs waiting for its RunDone
};

}  // namespace atl
