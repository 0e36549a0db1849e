// The resource manager: the cluster's single controller for resources. It owns the
// islands, hosts and devices, the virtual slices and their mapping onto devices, the
// registry of compiled functions, and client and executor liveness.
//
// Threading: Run() owns the ROUTER socket and all state; every handler runs on that one
// loop. The event proxy runs on its own thread.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "common/net/event_loop.h"
#include "common/net/events.h"
#include "common/net/rejection_log.h"
#include "common/net/transport.h"
#include "common/proto/codec.h"
#include "common/service/advertise.h"
#include "common/service/config.h"
#include "common/service/stall_guard.h"
#include "services/rm/event_proxy.h"
#include "services/rm/placement.h"
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

inline std::string RoutingId(const proto::Incoming& in) {
  return in.routing_id ? in.routing_id->to_string() : std::string();
}

class RmService {
 public:
  // `state_file` (empty: none) keeps the RM's state across restarts: read at Bind() when it
  // exists, rewritten on every change.
  RmService(zmq::context_t& context, ClusterConfig config, std::string state_file = "");

  // Loads the state file, binds the request socket and the event proxy. The bound
  // addresses are then known.
  Status Bind();
  // Serves until SIGINT/SIGTERM.
  void Run();

  // Valid after Bind(): where peers reach the RM and its event bus, and what it bound.
  const ServiceEndpoint& endpoint() const { return endpoint_; }
  const ServiceEndpoint& events_in() const { return events_in_; }
  const ServiceEndpoint& events_out() const { return events_out_; }

 private:
  using Host = RmState::Host;
  using Device = RmState::Device;
  using Slice = RmState::Slice;
  using Client = RmState::Client;
  using Function = RmState::Function;

  // A RegisterFunction waiting for every executor of its slice to compile.
  struct PendingRegistration {
    std::string client_routing_id;
    uint64_t client_request_id = 0;
    uint64_t function_id = 0;
    size_t acks_missing = 0;
    Clock::time_point deadline;
  };
  // A slice remapped off a lost or drained host, waiting for its functions to compile on
  // the new mapping before its client is told.
  struct PendingRemap {
    uint64_t slice = 0;
    std::string reason;
    size_t acks_missing = 0;
    Clock::time_point deadline;
    uint64_t drain = 0;  // the DrainHost (RM request id) that waits for it; 0: none
  };
  // A DrainHost, answered once every slice it moved was remapped (its client told).
  struct PendingDrain {
    std::string routing_id;  // of the member that asked
    uint64_t request_id = 0;
    size_t remaps_missing = 0;
    proto::DrainHostReply reply;
  };

  void OnRequest();
  Status Handle(proto::Incoming& in);
  Status OnRegisterExecutor(proto::Incoming& in);
  Status OnHeartbeat(proto::Incoming& in);
  Status OnRegisterScheduler(proto::Incoming& in);
  Status OnHelloClient(proto::Incoming& in);
  Status OnGoodbye(proto::Incoming& in);
  Status OnCreateSlice(proto::Incoming& in);
  Status OnRegisterFunction(proto::Incoming& in);
  Status OnCompileReply(proto::Incoming& in);
  Status OnClusterStatus(proto::Incoming& in);
  // Who owns what (owners.cc): asked by a store or scheduler (LookupOwners), and told to
  // them as it happens (OwnersKnown), so that they seldom need to ask: a new client's
  // user id to every store and scheduler, a new function's client to its island's scheduler.
  Status OnLookupOwners(proto::Incoming& in);
  void TellClientOwner(uint64_t client_id);
  void TellClientGone(uint64_t client_id, const std::string& why);
  void TellOwners(const proto::OwnersKnown& notice);  // to every live store and scheduler
  void TellFunctionOwner(uint64_t function_id, const std::string& island);
  // NotFound unless `client_id` is connected (saying why, for a client gone lately), and
  // PermissionDenied unless the sender of `in` may act for it.
  Status CheckClient(const proto::Incoming& in, uint64_t client_id, std::string_view action) const;

  // Liveness of every service (liveness.cc): executors, object stores and schedulers
  // heartbeat; one silent for `liveness` periods is declared lost, published, taken out of
  // placement and announced to every client (ServiceChanged), so that the runs needing it
  // fail naming it; one heard again is back.
  Status OnServiceHeartbeat(const proto::Heartbeat& beat, proto::Incoming& in);
  void CheckLiveness();
  // The part of CheckLiveness that declares silent services lost and drops silent clients.
  void CheckHeartbeats(Clock::time_point now);
  void OnSchedulerLost(const std::string& island, const std::string& why);
  void OnSchedulerBack(const std::string& island);
  // `instance`: the store process lost (the host's current one, unless it restarted).
  void OnStoreLost(Host& host, const std::string& why, uint64_t instance);
  void OnStoreBack(Host& host);
  // Sends `notice` to every connected client.
  void TellClients(const proto::ServiceChanged& notice);
  // Sends `notice` to the executor of `host` over its last connection, even while it counts as
  // lost (liveness.cc says why).
  void TellExecutor(const Host& host, const proto::ServiceChanged& notice);
  bool SchedulerAlive(const std::string& island) const;
  // An island not heard of before (not configured, no scheduler or host registered for it)
  // joins the cluster: logged and published (island.joined), named by `by`.
  void AdmitIsland(const std::string& island, const std::string& by);
  // Tells the slice's client where the slice runs now, and why.
  void TellSliceMoved(const Slice& slice, const std::string& reason);

  // Frees a client's slices (and so the load they put on devices), and remembers why it
  // went for the calls it may still make (gone_reasons_). `why` is the client.gone event's
  // reason: "goodbye", or "heartbeat lapsed: ..." with the lapse.
  void DropClient(uint64_t client_id, const std::string& why);
  void FinishRegistration(uint64_t rm_request_id, const Status& status);
  proto::SliceInfo DescribeSlice(const Slice& slice) const;
  // Learns where the host's executor is connected now and sends it what was held.
  void Reconnected(Host& host, const proto::Incoming& in);
  // Sends Compile of `function_id` to every host of `slice` under `rm_request`; returns how
  // many hosts will answer.
  // `only_host` (not empty): to that host alone.
  Result<size_t> SendCompile(uint64_t rm_request, uint64_t function_id, const Slice& slice,
                             const ir::FunctionDef& def, const std::string& only_host = "");
  // A restarted executor knows no function: every function of a slice with a device on
  // its host (FunctionsOn) is compiled there again (answers are not awaited).
  std::vector<uint64_t> FunctionsOn(const Host& host) const;
  void CompileAgainOn(const Host& host, const std::vector<uint64_t>& functions);

  // Elasticity (elastic.cc). A lost host: executors stop waiting for its tuples and its
  // partials in collectives, schedulers fail the queued gangs that need it, its store fails
  // what its executor never wrote, and every slice on it is remapped.
  void OnHostLost(Host& host, const std::string& reason);
  void OnHostBack(Host& host);
  void BroadcastHostChanged(const Host& host, bool lost, const std::string& reason);
  // Sends `message` to every island's scheduler, as a notice (request id 0).
  void TellSchedulers(const proto::HostChanged& message);
  // Moves every slice off `host`; `drain` (0: none) collects which moved and which could not,
  // and waits for their remaps.
  void RemapSlicesOff(const Host& host, const std::string& reason, uint64_t drain = 0);
  // The slice's functions compiled on its new mapping (or not): its client is told.
  void FinishRemap(uint64_t rm_request_id, const Status& status);
  // A host about to leave (`atoll stop`): taken out of placement, its slices moved off it as
  // for a lost host; answered once their clients were told (elastic.cc).
  Status OnDrainHost(proto::Incoming& in);
  // One remap of drain `drain` is done (or, for the count it starts with, the drain's own
  // pass): the drain is answered when none is left.
  void DrainStepDone(uint64_t drain);

  // Persistence (state_file.h): `state_` is saved after every change of what persists of
  // it, a registered function by appending it alone (SaveFunction); a failed write is
  // logged and published, not fatal. LoadState() starts afresh when there is no state file
  // yet.
  Status LoadState();
  // State saving (state_saving.cc): SaveState marks `state_` changed, written by the
  // FlushState that ends the turn (OnRequest, CheckLiveness), which then sends the answers
  // Answer held meanwhile. SaveStateNow writes at once (and sends what was held).
  void SaveState();
  void SaveStateNow();
  void FlushState();
  // Replies to `in` now, or, while a change to the state is not written yet, after it is.
  template <typename T>
  Status Answer(const proto::Incoming& in, const T& body) {
    if (!state_dirty_) return net::Reply(socket_, in, body);
    HeldReply held{{}, T::kKind, in.routing_id ? size_t{1} : size_t{0}};
    if (in.routing_id) held.frames.emplace_back(in.routing_id->data(), in.routing_id->size());
    held.frames.push_back(proto::EncodeHeader(in.header.request_id(), body));
    held_replies_.push_back(std::move(held));
    return Status::Ok();
  }
  void SaveFunction(uint64_t id, const RmState::Function& function);
  void ReportSaveError(const Status& saved);

  zmq::context_t& context_;
  ClusterConfig config_;
  std::vector<std::string> configured_islands_;  // the configuration's, a starting list
  std::string state_file_;
  zmq::socket_t socket_;
  EventProxy proxy_;
  std::unique_ptr<EventPublisher> events_;
  net::RejectionLog rejected_;  // requests refused, logged rate-limited per peer
  std::unique_ptr<PlacementPolicy> placement_;
  EventLoop loop_;
  ServiceEndpoint endpoint_, events_in_, events_out_;

  RmState state_;
  // Whether the RM may declare silent services lost now: not for a while after it restarted
  // (kReconnectGrace) or stalled.
  StallGuard stall_guard_;
  bool state_dirty_ = false;
  struct HeldReply {
    net::Frames frames;
    proto::Kind kind;
    size_t first_counted;  // past the routing id (net::SendCounted)
  };
  std::vector<HeldReply> held_replies_;  // Answer's, until FlushState
  // Why each client gone since the RM started went (DropClient's `why`): a client paused
  // past its lapse learns why at its next call. Dropped whole past kMaxGoneReasons, so that
  // it stays bounded (ids are never reused).
  static constexpr size_t kMaxGoneReasons = 4096;
  std::map<uint64_t, std::string> gone_reasons_;
  std::map<uint64_t, PendingRegistration> pending_;  // by the RM's own request id
  std::map<uint64_t, PendingRemap> remaps_;          // by the RM's own request id
  std::map<uint64_t, PendingDrain> drains_;          // by the RM's own request id
  // To object stores and island schedulers, for HostChanged. A notice to one that is gone
  // or not reading is dropped once its queue is full rather than stall the RM: any member
  // may register a scheduler, for an island of its choosing.
  net::DealerPool stores_;
  net::DealerPool schedulers_;
  uint64_t next_request_id_ = 1;
};

}  // namespace atl::rm
