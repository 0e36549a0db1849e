// Client::Impl: the client's state behind the public Client, Run and Future handles: its
// connections, the slices and functions it made, and its pure parts: the submissions in
// flight (Submissions), the losses and dropped connections it knows of (ServiceLosses), the
// runs held for their readers (ReadsLedger). Its methods (client_impl.cc) move what the
// sockets bring into those parts. Shared by the files that implement the handles.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "atoll/client.h"
#include "client/heartbeat.h"
#include "client/internal.h"
#include "client/read_ahead.h"
#include "client/reads_ledger.h"
#include "client/run_state.h"
#include "client/service_losses.h"
#include "client/submissions.h"
#include "common/net/transport.h"
#include "common/proto/ids.h"

namespace atl {

struct Client::Impl {
  ~Impl() { net::ForgetCredentials(context); }

  ClientOptions options;
  // Three sockets per store and scheduler it uses (a watched Requester): room for a slice
  // over hundreds of hosts, past ZeroMQ's default of 1023.
  zmq::context_t context{1, 8192};
  std::unique_ptr<net::Requester> rm;
  std::map<std::string, std::unique_ptr<net::Requester>> peers;  // schedulers and stores
  ReadAhead read_ahead{context};                // later runs' small results, read by a wait
  std::map<uint64_t, proto::SliceInfo> slices;  // this client's, by id
  // The functions registered on each slice, to move with it when the RM remaps it.
  std::map<uint64_t, std::vector<std::weak_ptr<const Function::Impl>>> functions;
  // Object stores and schedulers used: they hold this client's objects and runs (alive while
  // the RM's table lists it) and hear Goodbye.
  std::set<std::string> watchers;
  Submissions submissions;  // streamed submissions not answered yet; refused and failed runs
  ServiceLosses losses;     // services lost (announced or by their dropped connection)
  // The runs each run reads, until its schedulers said RunDone.
  ReadsLedger reads;

  std::unique_ptr<HeartbeatThread> heartbeat;
  uint64_t id = 0;
  uint64_t next_run = 1;
  uint64_t next_object = 1;

  // Reads whatever schedulers sent: answers to submissions, waiting at most `timeout` in
  // total while more than `keep` to one scheduler are missing, and RunDone and RunFailed
  // notices that have arrived (never waited for: a reader looks for them between its
  // reads' replies).
  void DrainAcks(std::chrono::milliseconds timeout, size_t keep = 0);
  // The requester for a scheduler or object store, connected on first use. Watched, so that
  // a call to a peer that refuses this client's key, or that is down, says so.
  Result<net::Requester*> Peer(const std::string& endpoint);
  // The same for a service that keeps what this client leaves there: told Goodbye.
  Result<net::Requester*> Watcher(const std::string& endpoint);
  // Applies what the RM sent on its own since the last call: services lost or back, and
  // slices remapped off lost devices; and the schedulers' and stores' dropped connections
  // (WatchConnections). Costs no round trip.
  void ApplyNotices();
  // Unavailable naming a service `needs` names that is down, for new run `run`; before
  // refusing, it looks once more (a notice period) for the RM's notice that it is back:
  // whoever saw it come back on the event stream and submitted at once must not be refused
  // for a notice in flight.
  Status AwaitUp(uint64_t run, const ServicesNeeded& needs);
  // The first loss announced since `run` was submitted of a service it needs; null if none.
  const Loss* LossFor(const RunState& run) const {
    return losses.LossFor(run.needs, run.losses_seen);
  }

  // Ids the client makes itself: unique per client, no round trip.
  uint64_t NextObjectId() { return proto::MakeObjectId(id, next_object++); }
  // A new run's id, live until its RunState goes (~RunState).
  uint64_t NextRunId() {
    const uint64_t run = proto::MakeRunId(id, next_run++);
    submissions.Started(run);
    return run;
  }

 private:
  // What a loss ends besides the runs that need the service: a lost scheduler's gangs will
  // never report, so what the runs there read may go (ReadsLedger::Lost).
  void ReleaseReadsOf(const Loss& loss);
  // A scheduler's or an object store's dropped connection loses what was in flight on it
  // both ways (a submission or a read, its answer, a notice), and one that restarted knows
  // none of the old one's runs or objects: the runs that need it fail as if the RM had
  // declared it lost (ServiceLosses). The schedulers are looked at on every call; the
  // stores, one per host used, once a notice period (as often as a wait looks).
  void WatchConnections();
};

}  // namespace atl
