// Controller: the RM's decisions as the cluster's single controller, without its sockets.
// It keeps what the RM knows (RmState), the work waiting on executors (PendingWork) and the
// liveness of every service and client, and for each request, heartbeat or tick of the
// liveness timer returns what the RM must send, publish and persist (RmActions), in order.
// RmService, the shell, decodes requests, checks who may send them (MayActFor for those
// naming a client), calls in here and carries the actions out.
//   registration  executors (a host and its devices), island schedulers and clients join;
//                 an executor or scheduler registering while believed alive restarted
//   liveness      a service silent for `liveness` heartbeats is lost, one heard again is
//                 back; a silent client is dropped with its slices (controller_liveness.cc)
//   functions     a registration is answered once every executor of its slice compiled
//                 it; who owns what is told to stores and schedulers (controller_functions.cc)
//   elasticity    a lost or drained host's slices are remapped onto live devices of their
//                 island, their clients told once the functions compiled there
//                 (controller_elastic.cc)
//
// Pure: what depends on time takes `now`; no socket, no clock, no thread (it logs, though).
// Not thread-safe: the RM's loop owns it.
//
// Example:
//   Controller rm(options, MakeSpreadEvenlyPolicy(), now);
//   ATOLL_ASSIGN_OR_RETURN(RmActions actions, rm.HelloClient(hello, caller, now));
//   ... send actions.list in order; rewrite the state file when actions.state_changed
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "atoll/status.h"
#include "common/proto/peer.h"
#include "common/proto/protocol.h"
#include "common/service/client_liveness.h"
#include "common/service/config.h"
#include "common/service/stall_guard.h"
#include "services/rm/pending_work.h"
#include "services/rm/placement.h"
#include "services/rm/rm_actions.h"
#include "services/rm/rm_state.h"

namespace atl::rm {

// How long executors get to compile a function before its registration (or a remap) fails.
inline constexpr auto kCompileTimeout = std::chrono::seconds(10);
// How long a restarted RM waits for every service and client to be heard again before it
// counts their heartbeats as missed (at least the liveness window itself). Reconnecting
// to a new RM takes longer than one heartbeat: each peer's ZeroMQ retries the connection
// on its own timer, then redoes the security handshake, all at once, and a loaded
// machine's peers took up to 1.4 s. Less would drop live clients, whose slices are then gone.
inline constexpr auto kReconnectGrace = std::chrono::seconds(5);

// How often the RM checks its peers' liveness: four times per heartbeat period, so that a
// silent service is declared lost at most a quarter period late.
std::chrono::milliseconds LivenessCheckPeriod(uint32_t heartbeat_ms);

// Who sent the request being handled.
struct Caller {
  std::string routing_id;  // of its connection to the RM's request socket
  uint64_t request_id = 0;
  proto::Peer sender;  // as the RM's socket authenticated it
};

struct ControllerOptions {
  uint32_t heartbeat_ms = 500;                  // every service's and client's heartbeat period
  uint32_t liveness = 4;                        // heartbeats missed before a peer is lost
  std::vector<std::string> configured_islands;  // the configuration's, a starting list
  QuotaConfig quotas;
  std::chrono::steady_clock::duration compile_timeout = kCompileTimeout;

  static ControllerOptions From(const ClusterConfig& config);
};

class Controller {
 public:
  // `start`: when the RM starts (its liveness checks are judged from then on).
  Controller(ControllerOptions options, std::unique_ptr<PlacementPolicy> placement,
             Clock::time_point start);

  const RmState& state() const { return state_; }
  const PendingWork& pending() const { return pending_; }
  // Starts again from `state` (the state file's) at `now`: every service and client counts
  // as heard then, and none is judged silent for kReconnectGrace.
  void Restore(RmState state, Clock::time_point now);

  // Registration (controller.cc). Each request's decision returns what to do, the reply
  // included, or the error to answer the request with; all take the same arguments, so
  // that the shell serves each through one template (RmService::Serve).
  Result<RmActions> RegisterExecutor(const proto::RegisterExecutor& req, const Caller& from,
                                     Clock::time_point now);
  Result<RmActions> RegisterScheduler(const proto::RegisterScheduler& req, const Caller& from,
                                      Clock::time_point now);
  Result<RmActions> HelloClient(const proto::HelloClient& req, const Caller& from,
                                Clock::time_point now);
  Result<RmActions> Goodbye(const proto::Goodbye& req, const Caller& from, Clock::time_point now);
  Result<RmActions> CreateSlice(const proto::CreateSlice& req, const Caller& from,
                                Clock::time_point now);
  // Answered (RmActions) once every executor of the slice compiled the function.
  Result<RmActions> RegisterFunction(const proto::RegisterFunction& req, const Caller& from,
                                     Clock::time_point now);
  // An executor's answer to the Compile of RM request `rm_request`: `error` OK or not.
  RmActions CompileAnswered(uint64_t rm_request, const Status& error);
  // The shell could not send the Compile of RM request `rm_request`: as a failed answer.
  RmActions CompileUnsent(uint64_t rm_request, const Status& error);
  proto::Owners LookupOwners(const proto::LookupOwners& req) const;
  // The cluster as `atoll status` shows it; the shell adds what is its own (event
  // endpoints, its loop's stall).
  proto::ClusterStatus DescribeCluster() const;

  // Who may send a request that names client `client_id` (the shell's MaySend::OwningClient
  // rows, checked before the decision): PermissionDenied unless `sender` is a member or holds
  // the key the client connected with. A client unknown passes: its decision answers NotFound
  // saying why (or ignores a gone client's heartbeat).
  atl::Status MayActFor(const proto::Peer& sender, uint64_t client_id,
                        std::string_view action) const;

  // Liveness (controller_liveness.cc). Heartbeats are not answered; only members heartbeat
  // as a service (the shell checks).
  Result<RmActions> Heartbeat(const proto::Heartbeat& beat, const Caller& from,
                              Clock::time_point now);
  // The liveness timer, four times per heartbeat period: silent services lost, silent
  // clients dropped (unless the RM itself stalled: StallGuard), compiles past their
  // deadline failed; once a heartbeat period, the table of live clients told to every live
  // store and scheduler (OwnersKnown::alive_clients).
  RmActions CheckLiveness(Clock::time_point now);

  // Elasticity (controller_elastic.cc): DrainHost, answered once every slice it moved off
  // the host was remapped.
  Result<RmActions> DrainHost(const proto::DrainHost& req, const Caller& from,
                              Clock::time_point now);

 private:
  using Host = RmState::Host;
  using Slice = RmState::Slice;

  // NotFound unless `client_id` is connected (saying why, for a client gone lately). Who
  // may act for it the shell checked before (MayActFor).
  atl::Status RequireKnownClient(uint64_t client_id, std::string_view action) const;
  // An island not heard of before joins the cluster: published (island.joined), named by `by`.
  void AdmitIsland(const std::string& island, const std::string& by, RmActions& out) const;
  void DropClient(uint64_t client_id, const std::string& why, RmActions& out);
  proto::SliceInfo DescribeSlice(const Slice& slice) const;
  void TellSliceMoved(const Slice& slice, const std::string& reason, RmActions& out) const;
  bool SchedulerAlive(const std::string& island) const;

  // Compiles.
  // Sends Compile of `function_id` to every host of `slice` (or `only_host` alone) under
  // `rm_request`, held on a host whose executor has not reconnected; returns how many hosts.
  size_t SendCompile(uint64_t rm_request, uint64_t function_id, const Slice& slice,
                     const ir::FunctionDef& def, RmActions& out, const std::string& only_host = "");
  // The executor of `host` connected from `routing_id`: the compiles held for it go there.
  void Reconnected(Host& host, const std::string& routing_id, RmActions& out);
  // A restarted executor knows no function: those of slices on its host compile again.
  std::vector<uint64_t> FunctionsOn(const Host& host) const;
  void CompileAgainOn(const Host& host, const std::vector<uint64_t>& functions, RmActions& out);
  void FinishRegistration(const PendingWork::Registration& done, const atl::Status& status,
                          RmActions& out);

  // Who owns what, told to every live store and scheduler as it happens (OwnersKnown).
  void TellOwners(const proto::OwnersKnown& notice, RmActions& out) const;
  void TellFunctionOwner(uint64_t function_id, const std::string& island, RmActions& out) const;
  // The table of live clients, once a heartbeat period.
  void TellClientTable(Clock::time_point now, RmActions& out);

  // Liveness of services (controller_liveness.cc).
  void ExecutorHeartbeat(const proto::Heartbeat& beat, Host& host, const Caller& from,
                         Clock::time_point now, RmActions& out);
  void StoreHeartbeat(const proto::Heartbeat& beat, Host& host, Clock::time_point now,
                      RmActions& out);
  void CheckHeartbeats(Clock::time_point now, RmActions& out);
  void FailLateCompiles(Clock::time_point now, RmActions& out);
  void SchedulerLost(const std::string& island, const std::string& why, RmActions& out);
  void SchedulerBack(const std::string& island, RmActions& out);
  // `instance`: the store process lost (the host's current one, unless it restarted).
  void StoreLost(Host& host, const std::string& why, uint64_t instance, RmActions& out);
  void StoreBack(Host& host, RmActions& out);
  void TellClients(const proto::ServiceChanged& notice, RmActions& out) const;
  // To the host's executor over its last connection, even while it counts as lost.
  void TellExecutor(const Host& host, const proto::ServiceChanged& notice, RmActions& out) const;

  // Elasticity (controller_elastic.cc).
  void HostLost(Host& host, const std::string& why, Clock::time_point now, RmActions& out);
  void HostBack(Host& host, RmActions& out);
  void BroadcastHostChanged(const Host& changed, bool lost, const std::string& reason,
                            RmActions& out) const;
  // Moves every slice off `host`; `drain` (0: none) collects which moved and which could
  // not, and waits for their remaps.
  void RemapSlicesOff(const Host& host, const std::string& reason, uint64_t drain,
                      Clock::time_point now, RmActions& out);
  void FinishRemap(const PendingWork::Remap& remap, const atl::Status& status, RmActions& out);
  void DrainStepDone(uint64_t drain, RmActions& out);

  ControllerOptions options_;
  std::unique_ptr<PlacementPolicy> placement_;
  RmState state_;
  PendingWork pending_;
  ClientLiveness clients_heard_;
  Clock::time_point table_told_{};  // when TellClientTable last told it
  // Whether silent services may be declared lost now: not for a while after the RM
  // restarted (kReconnectGrace) or stalled.
  StallGuard stall_guard_;
  // Why each client gone since the RM started went (DropClient's `why`): a client paused
  // past its lapse learns why at its next call. Dropped whole past kMaxGoneReasons, so that
  // it stays bounded (ids are never reused).
  static constexpr size_t kMaxGoneReasons = 4096;
  std::map<uint64_t, std::string> gone_reasons_;
};

}  // namespace atl::rm
