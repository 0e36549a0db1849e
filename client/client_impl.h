// Client::Impl: the client's state behind the public Client, Run and Future handles: its
// connections, the slices and functions it made, the submissions not yet answered, the
// losses the RM announced. Shared by the files that implement those handles.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "atoll/client.h"
#include "client/heartbeat.h"
#include "client/internal.h"
#include "client/read_ahead.h"
#include "client/reads_ledger.h"
#include "client/run_state.h"
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
  // Object stores and schedulers used: they track this client's liveness and hear Goodbye.
  std::set<std::string> watchers;
  // Streamed submissions not acknowledged yet: scheduler -> request id -> run.
  std::map<std::string, std::map<uint64_t, uint64_t>> unacked;
  std::map<uint64_t, size_t> acks_missing;  // by run
  // Runs a scheduler refused or said failed (RunFailed), with why; only runs still held
  // (live_runs): a notice may come after its run was dropped.
  std::map<uint64_t, Status> failed;
  std::set<uint64_t> live_runs;  // ids of the RunStates that exist
  // The runs each run reads, until its schedulers said RunDone.
  ReadsLedger reads;

  // Reads whatever schedulers sent: answers to submissions, waiting at most `timeout` in
  // total while more than `keep` to one scheduler are missing, and RunDone and RunFailed
  // notices that have arrived (never waited for: a reader looks for them between its
  // reads' replies).
  void DrainAcks(std::chrono::milliseconds timeout, size_t keep = 0) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (auto& [endpoint, pending] : unacked) {
      while (true) {
        const auto left = pending.size() <= keep
                              ? std::chrono::milliseconds(0)
                              : std::max(std::chrono::milliseconds(0),
                                         std::chrono::duration_cast<std::chrono::milliseconds>(
                                             deadline - std::chrono::steady_clock::now()));
        auto frames = net::RecvFrames(peers.at(endpoint)->socket(), left);
        if (!frames.ok() || !frames->has_value()) break;
        auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/false);
        if (!in.ok()) continue;
        if (in->header.request_id() == 0 && in->header.kind() == proto::Kind::kRunDone) {
          if (auto done = in->header.As<proto::RunDone>(); done.ok()) {
            reads.Done(endpoint, done->run_id);  // what it returns is dropped here
          }
          continue;
        }
        if (in->header.request_id() == 0 && in->header.kind() == proto::Kind::kRunFailed) {
          auto notice = in->header.As<proto::RunFailed>();
          if (notice.ok() && live_runs.count(notice->run_id) && !failed.count(notice->run_id)) {
            failed[notice->run_id] =
                proto::FromError({notice->error_code, notice->error})
                    .WithContext(fmt::format("run {} failed on island scheduler {}", notice->run_id,
                                             endpoint));
          }
          continue;
        }
        auto it = pending.find(in->header.request_id());
        if (it == pending.end()) continue;
        const uint64_t run = it->second;
        pending.erase(it);
        if (in->header.kind() == proto::Kind::kError) {
          auto error = in->header.As<proto::Error>();
          failed[run] =
              (error.ok() ? proto::FromError(*error) : error.status())
                  .WithContext("scheduler " + endpoint + " refused run " + std::to_string(run));
          reads.Done(endpoint, run);  // it will not run there: no RunDone comes
        }
        if (--acks_missing[run] == 0) acks_missing.erase(run);
      }
    }
  }
  // A service the RM declared lost (ServiceChanged).
  struct Loss {
    uint8_t role = 0;  // proto::Heartbeat::Role
    std::string name;
    std::string endpoint;
    std::string reason;
  };
  // Every loss announced so far, in order: a run fails for those after its submission.
  std::vector<Loss> losses;
  // The services lost now, until they are back, by (role, name): runs that need one are
  // refused at submission.
  std::map<std::pair<uint8_t, std::string>, Loss> down;
  // Connection drops seen so far, per scheduler submitted to and object store used
  // (WatchConnections).
  std::map<std::string, uint64_t> connection_drops;
  // When WatchConnections last looked at the object stores' connections.
  std::chrono::steady_clock::time_point stores_watched;
  // How often a wait looks for the RM's notices: a quarter of a heartbeat period, so that a
  // loss fails the runs that need the service well within a period of its declaration.
  std::chrono::milliseconds notice_period{25};

  std::unique_ptr<HeartbeatThread> heartbeat;
  uint64_t id = 0;
  uint64_t next_run = 1;
  uint64_t next_object = 1;

  // The requester for a scheduler or object store, connected on first use. Watched, so that
  // a call to a peer that refuses this client's key, or that is down, says so.
  Result<net::Requester*> Peer(const std::string& endpoint) {
    auto it = peers.find(endpoint);
    if (it == peers.end()) {
      auto r = std::make_unique<net::Requester>(context, endpoint);
      ATOLL_RETURN_IF_ERROR(r->Connect(/*watch_handshakes=*/true));
      it = peers.emplace(endpoint, std::move(r)).first;
    }
    return it->second.get();
  }
  // The same for a service that tracks this client's liveness.
  Result<net::Requester*> Watcher(const std::string& endpoint) {
    if (watchers.insert(endpoint).second) heartbeat->AddWatcher(endpoint);
    return Peer(endpoint);
  }
  // Applies what the RM sent on its own since the last call: services lost or back, and
  // slices remapped off lost devices; and the schedulers' and stores' dropped connections
  // (WatchConnections). Costs no round trip.
  void ApplyNotices() {
    WatchConnections();
    for (auto& notice : rm->TakeNotices()) {
      if (notice.header.kind() == proto::Kind::kServiceChanged) {
        auto changed = notice.header.As<proto::ServiceChanged>();
        if (!changed.ok()) continue;
        const auto key = std::make_pair(changed->role, changed->name);
        if (changed->lost) {
          Loss loss{changed->role, changed->name, changed->endpoint, changed->reason};
          Lose(loss);
          down[key] = std::move(loss);
        } else {
          down.erase(key);
        }
        continue;
      }
      if (notice.header.kind() != proto::Kind::kSliceRemapped) continue;
      auto remapped = notice.header.As<proto::SliceRemapped>();
      if (!remapped.ok() || !slices.count(remapped->slice.slice_id)) continue;
      const proto::SliceInfo& info = remapped->slice;
      slices[info.slice_id] = info;
      auto& fns = functions[info.slice_id];
      std::erase_if(fns, [](const auto& f) { return f.expired(); });
      for (const auto& f : fns) f.lock()->slice = info;
    }
  }
  // Records a lost service: the runs submitted before that need it fail (LossFor).
  void Lose(const Loss& loss) {
    // What runs there read may go: their gangs there will never report.
    if (loss.role == proto::Heartbeat::kScheduler) (void)reads.Lost(loss.endpoint);
    losses.push_back(loss);
  }
  // A scheduler's or an object store's dropped connection loses what was in flight on it
  // both ways (a submission or a read, its answer, a notice), and one that restarted knows
  // none of the old one's runs or objects: the runs that need it fail as if the RM had
  // declared it lost, without waiting for the RM's notice, which comes a liveness window
  // later (and which a client misses while the RM itself restarts). Not `down`: it may be
  // back at once, and the RM says when it is not. The schedulers are looked at on every
  // call; the stores, one per host used, once a notice period (as often as a wait looks).
  void WatchConnections() {
    for (const auto& [endpoint, pending] : unacked) {
      if (!Dropped(endpoint)) continue;
      std::string scheduler = "the island scheduler at " + endpoint;
      for (const auto& [slice_id, slice] : slices) {
        if (slice.scheduler_endpoint == endpoint) {
          scheduler = fmt::format("the scheduler of island {} ({})", slice.island, endpoint);
          break;
        }
      }
      LoseDropped(proto::Heartbeat::kScheduler, "", endpoint, scheduler);
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - stores_watched < notice_period) return;
    stores_watched = now;
    std::set<std::string> looked;  // a host's devices share its store
    for (const auto& [slice_id, slice] : slices) {
      for (const auto& device : slice.devices) {
        const std::string& store = device.store_endpoint;
        if (!peers.count(store) || !looked.insert(store).second || !Dropped(store)) continue;
        LoseDropped(proto::Heartbeat::kStore, device.host, store,
                    fmt::format("the object store of host {} ({})", device.host, store));
      }
    }
  }
  // Whether peer `endpoint`'s connection dropped since the last look.
  bool Dropped(const std::string& endpoint) {
    const uint64_t drops = peers.at(endpoint)->ConnectionDrops();
    return std::exchange(connection_drops[endpoint], drops) != drops;
  }
  // Records the loss of peer `endpoint`, called `who`, whose connection dropped.
  void LoseDropped(uint8_t role, const std::string& name, const std::string& endpoint,
                   const std::string& who) {
    Lose({role, name, endpoint,
          who + " was lost: its connection dropped (it died or restarted, or the network "
                "failed)"});
  }
  // The first loss announced since `run` was submitted of a service it needs; null if none.
  const Loss* LossFor(const RunState& run) const {
    for (size_t i = run.losses_seen; i < losses.size(); ++i) {
      if (Needs(run, losses[i])) return &losses[i];
    }
    return nullptr;
  }
  // Unavailable naming a service `run` needs that is lost now; OK when all are up.
  Status CheckUp(const RunState& run) const {
    for (const auto& [key, loss] : down) {
      if (Needs(run, loss)) return Unavailable(fmt::format("run {}: {}", run.id, loss.reason));
    }
    return Status::Ok();
  }
  static bool Needs(const RunState& run, const Loss& loss) {
    switch (loss.role) {
      case proto::Heartbeat::kScheduler:
        return run.needs_schedulers.count(loss.endpoint) > 0;
      case proto::Heartbeat::kStore:
        return run.needs_stores.count(loss.endpoint) > 0;
      case proto::Heartbeat::kExecutor:
        return run.needs_hosts.count(loss.name) > 0;
      default:
        return false;
    }
  }

  // Ids the client makes itself: unique per client, no round trip.
  uint64_t NextObjectId() { return proto::MakeObjectId(id, next_object++); }
  // A new run's id, live until its RunState goes (~RunState).
  uint64_t NextRunId() {
    const uint64_t run = proto::MakeRunId(id, next_run++);
    live_runs.insert(run);
    return run;
  }
};

}  // namespace atl
