// Messages the resource manager handles or sends. See protocol.h.
#pragma once

#include <charconv>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "atoll/status.h"
#include "common/proto/message_kind.h"

namespace atl::proto {

struct DeviceDesc {
  std::string kind;  // the host's kind ([[islands.hosts]] kind): "cpu" or "sim"
  uint64_t memory_bytes = 0;
  bool operator==(const DeviceDesc&) const = default;
  MSGPACK_DEFINE(kind, memory_bytes);
};

// Executor -> RM, at start and again whenever the RM does not know it.
struct RegisterExecutor {
  static constexpr Kind kKind = Kind::kRegisterExecutor;
  std::string host;
  std::string island;
  std::string control_endpoint;  // the executor's ROUTER for dispatch and compile
  std::string data_endpoint;     // the executor's data-plane ROUTER
  std::string store_endpoint;    // the host's object store
  std::vector<DeviceDesc> devices;
  bool operator==(const RegisterExecutor&) const = default;
  MSGPACK_DEFINE(host, island, control_endpoint, data_endpoint, store_endpoint, devices);
};

struct RegisterExecutorReply {
  static constexpr Kind kKind = Kind::kRegisterExecutorReply;
  std::vector<uint32_t> device_ids;  // cluster-wide ids, one per DeviceDesc in order
  uint32_t heartbeat_ms = 0;
  // The functions the RM compiles on it right after this reply (a restarted executor's:
  // those of slices with a device on its host). Dispatches may reach it first; one naming
  // a function still coming waits for its Compile.
  std::vector<uint64_t> functions_coming;
  bool operator==(const RegisterExecutorReply&) const = default;
  MSGPACK_DEFINE(device_ids, heartbeat_ms, functions_coming);
};

// "Still alive": executors, schedulers and object stores -> RM; clients -> RM, their
// object stores and schedulers. No reply while the receiver knows the sender; an Error
// (NotFound) when it does not, so that a service re-registers after an RM restart.
struct Heartbeat {
  static constexpr Kind kKind = Kind::kHeartbeat;
  enum Role : uint8_t { kExecutor = 0, kClient = 1, kScheduler = 2, kStore = 3 };
  uint8_t role = kClient;
  std::string id;  // executor's or store's host name, scheduler's island, or client id in decimal
  uint64_t instance = 0;  // a store's (StoreHelloReply): a new one means it restarted
  // A service's: its event loop's longest stall so far (EventLoop::LongestStall), which the
  // RM shows in its status. 0 from clients.
  uint64_t longest_stall_us = 0;
  bool operator==(const Heartbeat&) const = default;
  MSGPACK_DEFINE(role, id, instance, longest_stall_us);
};

// The client id of a client's heartbeat; InvalidArgument for an executor's, an unknown
// role or an id that is not a decimal number.
inline Result<uint64_t> HeartbeatClientId(const Heartbeat& beat) {
  if (beat.role != Heartbeat::kClient) {
    return InvalidArgument("not a client's heartbeat (role " + std::to_string(beat.role) + ")");
  }
  uint64_t client = 0;
  const char* end = beat.id.data() + beat.id.size();
  const auto [ptr, ec] = std::from_chars(beat.id.data(), end, client);
  if (beat.id.empty() || ec != std::errc() || ptr != end) {
    return InvalidArgument("client heartbeat id '" + beat.id + "' is not a decimal client id");
  }
  return client;
}

struct RegisterScheduler {
  static constexpr Kind kKind = Kind::kRegisterScheduler;
  std::string island;
  std::string endpoint;
  bool operator==(const RegisterScheduler&) const = default;
  MSGPACK_DEFINE(island, endpoint);
};

struct HelloClient {
  static constexpr Kind kKind = Kind::kHelloClient;
  std::string name;
  bool operator==(const HelloClient&) const = default;
  MSGPACK_DEFINE(name);
};

struct HelloClientReply {
  static constexpr Kind kKind = Kind::kHelloClientReply;
  uint64_t client_id = 0;
  uint32_t heartbeat_ms = 0;
  bool operator==(const HelloClientReply&) const = default;
  MSGPACK_DEFINE(client_id, heartbeat_ms);
};

struct Goodbye {
  static constexpr Kind kKind = Kind::kGoodbye;
  uint64_t client_id = 0;
  bool operator==(const Goodbye&) const = default;
  MSGPACK_DEFINE(client_id);
};

// RM -> every executor, every island scheduler, and the host's own object store: a host
// was lost (its executor missed `liveness` heartbeats) or came back. Shards waiting for the
// lost host's tuples or for its partials in a collective fail with `reason`, naming it;
// schedulers fail the queued gangs that need it; its store fails the outputs its executor
// never wrote. No reply.
struct HostChanged {
  static constexpr Kind kKind = Kind::kHostChanged;
  std::string host;
  std::string control_endpoint;
  std::vector<uint32_t> device_ids;
  bool lost = true;
  std::string reason;
  std::string data_endpoint;  // where collectives meet the host (GangLayout's endpoints)
  bool operator==(const HostChanged&) const = default;
  MSGPACK_DEFINE(host, control_endpoint, device_ids, lost, reason, data_endpoint);
};

// RM -> every client, and to the services that depend on the changed one (a store's own
// executor): a scheduler, an object store or an executor was declared lost (silent for
// `liveness` heartbeats) or is back. Clients fail the runs that need a lost service, naming
// it; an executor whose store is back maps its new arena. A notice: no reply.
struct ServiceChanged {
  static constexpr Kind kKind = Kind::kServiceChanged;
  uint8_t role = Heartbeat::kScheduler;  // Heartbeat::Role of the service
  std::string name;                      // island (scheduler) or host (store, executor)
  std::string endpoint;                  // where it listens (an executor's control endpoint)
  bool lost = true;
  std::string reason;  // for a loss: what was lost and why
  // A store's process instance (StoreHelloReply::instance): the one lost, or the one back;
  // 0 for other roles. An executor that found a restart itself has moved on to the new
  // instance by the time the RM's notice of it comes, and must not drop that one.
  uint64_t instance = 0;
  bool operator==(const ServiceChanged&) const = default;
  MSGPACK_DEFINE(role, name, endpoint, lost, reason, instance);
};

// A scheduler or object store -> RM: whom do these clients and functions belong to? For
// checking that a request's sender may act for the client it names (the authenticated
// sender is the key, never a field of the request). Members only. Answered with Owners.
struct LookupOwners {
  static constexpr Kind kKind = Kind::kLookupOwners;
  std::vector<uint64_t> clients;
  std::vector<uint64_t> functions;
  bool operator==(const LookupOwners&) const = default;
  MSGPACK_DEFINE(clients, functions);
};

struct Owners {
  static constexpr Kind kKind = Kind::kOwners;
  // Per client asked: the ZAP user id it connected with ("" on plain text), and whether it
  // is connected now. A client the RM does not know is not alive.
  std::vector<std::string> client_users;
  std::vector<bool> clients_alive;
  // Per client asked: why it left, as its client.gone event said ("goodbye", "heartbeat
  // lapsed: ..."); "" when it is alive, never connected, or left before the RM last started.
  std::vector<std::string> clients_gone_why;
  // Per function asked: the client that registered it; 0 when the RM knows no such function.
  std::vector<uint64_t> function_clients;
  // Every client id below this one was given out: a client below it that is not alive has
  // left (said goodbye or lapsed); one at or above it never connected.
  uint64_t next_client_id = 0;
  bool operator==(const Owners&) const = default;
  MSGPACK_DEFINE(client_users, clients_alive, clients_gone_why, function_clients, next_client_id);
};

// A notice from the RM to every object store and scheduler (request id 0, no reply): who a
// client connected as, when it says hello, whose a function is, when it is registered, and
// which client left and why, when the RM drops it (else a service told of a client that
// never used it would take it for connected for ever).
// So a service knows a new client before it hears from it, instead of asking the RM
// (LookupOwners) from its event loop: a round trip per new client that, with hundreds
// connecting at once, stalled the loops for seconds (docs/design-notes.md).
// Each heartbeat period the RM also tells its whole table of live clients (`table` set,
// alive_clients, the other lists empty): clients heartbeat the RM alone, and a store or
// scheduler counts a client it serves as heard while the table lists it
// (ClientLiveness::TableHeard).
struct OwnersKnown {
  static constexpr Kind kKind = Kind::kOwnersKnown;
  std::vector<uint64_t> clients;
  std::vector<std::string> client_users;  // per client: its ZAP user id ("" on plain text)
  std::vector<uint64_t> functions;
  std::vector<uint64_t> function_clients;  // per function: the client that registered it
  std::vector<uint64_t> gone_clients;
  std::vector<std::string> gone_why;    // per gone client: as Owners::clients_gone_why
  bool table = false;                   // a table, not a notice of one change
  std::vector<uint64_t> alive_clients;  // the table: every client the RM counts live
  bool operator==(const OwnersKnown&) const = default;
  MSGPACK_DEFINE(clients, client_users, functions, function_clients, gone_clients, gone_why, table,
                 alive_clients);
};

// A member (`atoll stop`) -> RM: host `host` is about to leave. The RM takes its devices
// out of placement, moves every slice with a virtual device there onto other live devices
// of its island as it does for a lost host (the reason says "drained"), publishes
// host.drained, and answers DrainHostReply once each moved slice's client was told
// (SliceRemapped). The host's running work goes on meanwhile. Members only.
struct DrainHost {
  static constexpr Kind kKind = Kind::kDrainHost;
  std::string host;
  bool operator==(const DrainHost&) const = default;
  MSGPACK_DEFINE(host);
};

struct DrainHostReply {
  static constexpr Kind kKind = Kind::kDrainHostReply;
  std::vector<uint64_t> moved;  // slices now off the host
  // Slices that found no device to take over: they keep the host's devices, and their
  // runs fail naming them once it is gone.
  std::vector<uint64_t> kept;
  bool operator==(const DrainHostReply&) const = default;
  MSGPACK_DEFINE(moved, kept);
};

struct CreateSlice {
  static constexpr Kind kKind = Kind::kCreateSlice;
  uint64_t client_id = 0;
  uint32_t num_devices = 0;
  std::string island;  // empty: any island
  std::string kind;    // empty: any kind
  bool operator==(const CreateSlice&) const = default;
  MSGPACK_DEFINE(client_id, num_devices, island, kind);
};

struct DeviceInfo {
  uint32_t device_id = 0;  // cluster-wide
  std::string host;
  uint32_t local_index = 0;  // index among the executor's devices
  std::string control_endpoint;
  std::string data_endpoint;
  std::string store_endpoint;
  bool operator==(const DeviceInfo&) const = default;
  MSGPACK_DEFINE(device_id, host, local_index, control_endpoint, data_endpoint, store_endpoint);
};

struct SliceInfo {
  static constexpr Kind kKind = Kind::kSliceInfo;
  uint64_t slice_id = 0;
  std::string island;
  std::string scheduler_endpoint;
  std::vector<DeviceInfo> devices;  // virtual device i is devices[i]
  // Which mapping of the slice onto devices this is: 0 when made, one more per remap. A
  // run lowered for one mapping does not run on another's compiled functions.
  uint32_t mapping = 0;
  bool operator==(const SliceInfo&) const = default;
  MSGPACK_DEFINE(slice_id, island, scheduler_endpoint, devices, mapping);
};

struct RegisterFunction {
  static constexpr Kind kKind = Kind::kRegisterFunction;
  uint64_t client_id = 0;
  uint64_t slice_id = 0;
  ir::FunctionDef function;
  bool operator==(const RegisterFunction&) const = default;
  MSGPACK_DEFINE(client_id, slice_id, function);
};

// RM -> client (unsolicited, request id 0): the slice's virtual devices now map onto
// `slice.devices`, and the slice's functions are compiled there. Sent once every executor
// of the new mapping compiled them.
struct SliceRemapped {
  static constexpr Kind kKind = Kind::kSliceRemapped;
  SliceInfo slice;
  std::string reason;  // e.g. "host h1 (device 1) lost: ..."
  bool operator==(const SliceRemapped&) const = default;
  MSGPACK_DEFINE(slice, reason);
};

// Sent once every executor of the slice has compiled the function.
struct RegisterFunctionReply {
  static constexpr Kind kKind = Kind::kRegisterFunctionReply;
  uint64_t function_id = 0;
  bool operator==(const RegisterFunctionReply&) const = default;
  MSGPACK_DEFINE(function_id);
};

struct GetClusterStatus {
  static constexpr Kind kKind = Kind::kGetClusterStatus;
  bool operator==(const GetClusterStatus&) const = default;
  MSGPACK_DEFINE();
};

struct DeviceStatus {
  uint32_t device_id = 0;
  std::string kind;
  uint64_t memory_bytes = 0;
  uint32_t slices = 0;  // how many slices map a virtual device onto it
  bool operator==(const DeviceStatus&) const = default;
  MSGPACK_DEFINE(device_id, kind, memory_bytes, slices);
};

struct HostStatus {
  std::string name;
  bool alive = false;
  std::string control_endpoint;
  std::string store_endpoint;
  std::vector<DeviceStatus> devices;
  bool store_alive = false;
  // The longest stall of the executor's and the store's event loops, as their heartbeats
  // said (Heartbeat::longest_stall_us).
  uint64_t executor_stall_us = 0;
  uint64_t store_stall_us = 0;
  bool operator==(const HostStatus&) const = default;
  MSGPACK_DEFINE(name, alive, control_endpoint, store_endpoint, devices, store_alive,
                 executor_stall_us, store_stall_us);
};

struct IslandStatus {
  std::string name;
  std::string scheduler_endpoint;  // empty until its scheduler registers
  std::vector<HostStatus> hosts;
  bool scheduler_alive = false;     // registered and heard from within the liveness window
  uint64_t scheduler_stall_us = 0;  // its event loop's longest stall, as HostStatus's
  bool operator==(const IslandStatus&) const = default;
  MSGPACK_DEFINE(name, scheduler_endpoint, hosts, scheduler_alive, scheduler_stall_us);
};

struct SliceStatus {
  uint64_t slice_id = 0;
  uint64_t client_id = 0;
  std::string island;
  std::vector<uint32_t> device_ids;
  bool operator==(const SliceStatus&) const = default;
  MSGPACK_DEFINE(slice_id, client_id, island, device_ids);
};

struct ClusterStatus {
  static constexpr Kind kKind = Kind::kClusterStatus;
  std::vector<IslandStatus> islands;
  std::vector<SliceStatus> slices;
  uint32_t functions = 0;
  uint32_t clients = 0;
  // The RM's event bus, as it advertises it: where services publish (a host joining the
  // cluster learns it here) and where watchers subscribe.
  std::string events_in;
  std::string events_out;
  uint64_t rm_stall_us = 0;  // the RM's event loop's longest stall
  bool operator==(const ClusterStatus&) const = default;
  MSGPACK_DEFINE(islands, slices, functions, clients, events_in, events_out, rm_stall_us);
};

}  // namespace atl::proto
