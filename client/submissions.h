// Submissions: the client's runs in flight at their island schedulers. A submission is
// streamed (sent without waiting for its answer, read later), so the client keeps which
// requests to each scheduler are unanswered and for which run, which runs still miss an
// answer, and the runs a scheduler refused or said failed, with why. Each message a
// scheduler sends this client is taken here (Take), which says what it meant.
//
// Pure bookkeeping, no sockets (Client::Impl::DrainAcks reads them). Not thread-safe: the
// Client's thread owns it.
//
// Example:
//   submissions.Started(run);  submissions.Sent("tcp://sched:1", request, run);
//   ... for each message read from that scheduler:
//   Submissions::Heard heard = submissions.Take("tcp://sched:1", in.header);
//   if (heard.ends_reads) ledger.Done("tcp://sched:1", heard.run);
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "atoll/status.h"
#include "common/proto/codec.h"

namespace atl {

class Submissions {
 public:
  // Submissions to one island scheduler that may go unanswered at once: below the ZeroMQ
  // high-water mark (1,000 messages) of the scheduler's queue of answers to this client.
  static constexpr size_t kMaxUnanswered = 256;

  // What one message from a scheduler meant.
  struct Heard {
    enum Kind {
      kNothing,    // not for a run known here: a stale answer, a notice that did not decode
      kAccepted,   // the answer to a submission: the run is queued there
      kRefused,    // an Error answering a submission: the run failed (Failure)
      kRunDone,    // notice: the run's gangs there are done
      kRunFailed,  // notice: the run failed there (Failure), first failure only
    };
    Kind kind = kNothing;
    uint64_t run = 0;
    // The scheduler is done with `run`: what the run reads may go (ReadsLedger::Done).
    bool ends_reads = false;
  };

  // Run `run` exists (its RunState); a failure notice is kept only for such a run.
  void Started(uint64_t run) { live_.insert(run); }
  // Run `run` is gone: nothing about it is kept any longer.
  void Ended(uint64_t run);
  // Submission `request` of `run` was sent to `scheduler`.
  void Sent(const std::string& scheduler, uint64_t request, uint64_t run);
  // What `header`, received from `scheduler`, meant; answers and failures are recorded.
  Heard Take(const std::string& scheduler, const proto::Header& header);

  // Submissions to `scheduler` not answered yet.
  size_t Unanswered(const std::string& scheduler) const;
  // Whether every scheduler `run` was sent to answered it.
  bool Answered(uint64_t run) const { return acks_missing_.count(run) == 0; }
  // Why `run` was refused or failed; null while neither happened.
  const Status* Failure(uint64_t run) const;
  // Calls `visit(scheduler)` for every scheduler ever submitted to, in order.
  template <typename Visit>
  void ForEachScheduler(Visit visit) const {
    for (const auto& [scheduler, pending] : unanswered_) visit(scheduler);
  }

 private:
  std::map<std::string, std::map<uint64_t, uint64_t>> unanswered_;  // scheduler -> request -> run
  std::map<uint64_t, size_t> acks_missing_;                         // by run
  std::map<uint64_t, Status> failed_;                               // by run
  std::set<uint64_t> live_;
};

}  // namespace atl
