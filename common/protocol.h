// Every message kind atoll sends, defined once. A message on the wire is a ZeroMQ multipart
// message: [routing id, only on ROUTER sockets] [header] [data frames...]. The header is a
// msgpack array [version, kind, request id, body]; bodies are msgpack arrays (hot-path
// messages are arrays, never maps: ~0.3 us against ~2 us to encode and decode). Tensor
// bytes never go inside the header; they travel as frames after it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "common/ir.h"
#include "common/msgpack_trimmed.h"

namespace atl::proto {

inline constexpr uint32_t kVersion = 1;

enum class Kind : uint16_t {
  // Generic replies.
  kOk = 1,
  kError = 2,
  // Resource manager.
  kRegisterExecutor = 10,
  kRegisterExecutorReply = 11,
  kHeartbeat = 12,
  kRegisterScheduler = 13,
  kHelloClient = 14,
  kHelloClientReply = 15,
  kCreateSlice = 16,
  kSliceInfo = 17,
  kRegisterFunction = 18,
  kRegisterFunctionReply = 19,
  kGetClusterStatus = 20,
  kClusterStatus = 21,
  kGoodbye = 22,
  kHostChanged = 23,
  kSliceRemapped = 24,
  // Executor.
  kCompile = 40,
  kDispatch = 41,
  kTupleBatch = 42,
  kRunLoop = 43,
  // Scheduler.
  kSubmitProgram = 60,
  kSubmitReply = 61,
  kGangDone = 62,
  // Object store.
  kStoreHello = 80,
  kStoreHelloReply = 81,
  kCreateObject = 82,
  kCreateObjectReply = 83,
  kSealObject = 84,
  kPutObject = 85,
  kGetObject = 86,
  kGetObjectReply = 87,
  kReleaseObject = 88,
  kGetStoreStats = 89,
  kStoreStats = 90,
};

std::string_view KindName(Kind kind);

// ---------------------------------------------------------------------------------------
// Generic replies.

struct Ok {
  static constexpr Kind kKind = Kind::kOk;
  bool operator==(const Ok&) const = default;
  MSGPACK_DEFINE();
};

struct Error {
  static constexpr Kind kKind = Kind::kError;
  int32_t code = 0;  // atl::Code
  std::string message;
  bool operator==(const Error&) const = default;
  MSGPACK_DEFINE(code, message);
};

// ---------------------------------------------------------------------------------------
// Resource manager.

struct DeviceDesc {
  std::string kind;  // "cpu"
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
  bool operator==(const RegisterExecutorReply&) const = default;
  MSGPACK_DEFINE(device_ids, heartbeat_ms);
};

// Executor or client -> RM, and client -> object store: "still alive". No reply.
struct Heartbeat {
  static constexpr Kind kKind = Kind::kHeartbeat;
  enum Role : uint8_t { kExecutor = 0, kClient = 1 };
  uint8_t role = kClient;
  std::string id;  // executor host name, or client id in decimal
  bool operator==(const Heartbeat&) const = default;
  MSGPACK_DEFINE(role, id);
};

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

// RM -> every executor, and the host's own object store: a host was lost (its executor
// missed `liveness` heartbeats) or came back. Shards waiting for the lost host's tuples
// fail with `reason`, naming it; its store fails the outputs its executor never wrote.
// No reply.
struct HostChanged {
  static constexpr Kind kKind = Kind::kHostChanged;
  std::string host;
  std::string control_endpoint;
  std::vector<uint32_t> device_ids;
  bool lost = true;
  std::string reason;
  bool operator==(const HostChanged&) const = default;
  MSGPACK_DEFINE(host, control_endpoint, device_ids, lost, reason);
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
  bool operator==(const SliceInfo&) const = default;
  MSGPACK_DEFINE(slice_id, island, scheduler_endpoint, devices);
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
  bool operator==(const HostStatus&) const = default;
  MSGPACK_DEFINE(name, alive, control_endpoint, store_endpoint, devices);
};

struct IslandStatus {
  std::string name;
  std::string scheduler_endpoint;  // empty until its scheduler registers
  std::vector<HostStatus> hosts;
  bool operator==(const IslandStatus&) const = default;
  MSGPACK_DEFINE(name, scheduler_endpoint, hosts);
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
  bool operator==(const ClusterStatus&) const = default;
  MSGPACK_DEFINE(islands, slices, functions, clients);
};

// ---------------------------------------------------------------------------------------
// Executor.

// RM -> executor: compile (here: validate and keep) a function ahead of its first call.
// Answered with Ok or Error carrying the same request id.
struct Compile {
  static constexpr Kind kKind = Kind::kCompile;
  uint64_t function_id = 0;
  uint32_t num_shards = 0;
  ir::FunctionDef function;
  // The data endpoint of the executor that runs each shard: where collectives meet.
  std::vector<std::string> shard_endpoints;
  bool operator==(const Compile&) const = default;
  MSGPACK_DEFINE(function_id, num_shards, function, shard_endpoints);
};

// Where one input of a shard comes from.
struct InputSource {
  enum Kind : uint8_t {
    kTuple = 0,  // pushed by the producing executor, keyed (run, node, input, shard)
    kStore = 1,  // shard `shard` of object `object_id` in this host's object store
  };
  uint8_t kind = kTuple;
  uint64_t object_id = 0;
  uint32_t shard = 0;
  bool operator==(const InputSource&) const = default;
  MSGPACK_DEFINE(kind, object_id, shard);
};

// A part of a shard that travels on its own when an edge reshards: the block of the
// producer's local shard starting at `begin` with shape `size`, written at `dst_begin` into
// the consumer's local shard of shape `dst_shape`, which is whole after `of` pieces.
// of == 0: the whole shard, as is.
struct Piece {
  Shape begin;
  Shape size;
  Shape dst_begin;
  Shape dst_shape;
  uint32_t of = 0;
  bool operator==(const Piece&) const = default;
  MSGPACK_DEFINE(begin, size, dst_begin, dst_shape, of);
};

// Where one output of a shard goes; an output may go to several places.
struct OutputDest {
  enum Kind : uint8_t {
    kTuple = 0,  // to executor `data_endpoint`, as input `input` of shard `shard` of `node`
    kStore = 1,  // into this host's object store as shard `shard` of `object_id`
  };
  uint8_t kind = kTuple;
  std::string data_endpoint;
  uint32_t node = 0;
  uint32_t input = 0;
  uint32_t shard = 0;
  uint64_t object_id = 0;
  Piece piece;  // kTuple: the part of the output that goes there
  // Sparse exchange: >= 0 names the output holding each row's destination shard (of
  // `route_shards`); only the rows bound for `shard` go, possibly none, and piece.of says
  // how many producer shards send to it.
  int32_t route_by = -1;
  uint32_t route_shards = 0;
  bool operator==(const OutputDest&) const = default;
  MSGPACK_DEFINE(kind, data_endpoint, node, input, shard, object_id, piece, route_by, route_shards);
};

// One shard of one gang: everything an executor needs to run it without asking anyone.
struct Entry {
  uint64_t run_id = 0;
  uint32_t node = 0;
  uint64_t gang_seq = 0;  // position in the island's single order; set by the scheduler
  uint64_t function_id = 0;
  uint32_t device = 0;  // local device index on the executor
  uint32_t shard = 0;
  uint32_t num_shards = 0;
  uint64_t owner_client = 0;
  // Dispatch this node only once the run's previous node finished everywhere: the
  // program asked for sequential dispatch, or the node is irregular.
  bool sequential = false;
  std::vector<InputSource> inputs;
  std::vector<std::vector<OutputDest>> outputs;
  // Control endpoints of the other executors that send this shard tuples: when one of them
  // is lost, the shard fails instead of waiting for ever.
  std::vector<std::string> peers;
  bool operator==(const Entry&) const = default;
  MSGPACK_DEFINE(run_id, node, gang_seq, function_id, device, shard, num_shards, owner_client,
                 sequential, inputs, outputs, peers);
};

// Scheduler -> executor: all of this executor's entries of one program, in gang order.
struct Dispatch {
  static constexpr Kind kKind = Kind::kDispatch;
  std::vector<Entry> entries;
  bool operator==(const Dispatch&) const = default;
  MSGPACK_DEFINE(entries);
};

// A benchmark's multi-controller baseline, sent straight to each executor (no scheduler):
// run `steps` steps of a one-input, one-output function on this executor's shards
// `shards` (on local devices `devices`), each step's output feeding the next step on the
// same device, synchronised with the other executors only by the function's collectives.
// Data frame 0 is the first step's input (dtype, shape); the last step's output lands in
// the object store as shard s of `result_object`. No reply.
struct RunLoop {
  static constexpr Kind kKind = Kind::kRunLoop;
  uint64_t run_id = 0;
  uint64_t function_id = 0;
  uint32_t steps = 0;
  uint64_t owner_client = 0;
  std::vector<uint32_t> shards;
  std::vector<uint32_t> devices;
  uint64_t result_object = 0;
  DType dtype = DType::kF32;
  Shape shape;
  bool operator==(const RunLoop&) const = default;
  MSGPACK_DEFINE(run_id, function_id, steps, owner_client, shards, devices, result_object, dtype,
                 shape);
};

// Executor -> executor: tensors tagged with their destination shard. A `packed` tuple's
// bytes lie in the batch's first data frame, back to back with the other packed tuples' in
// order (small tensors share one frame); any other tuple's bytes are a data frame of its
// own, in order after that one (see services/executor/tuple_frames.h). A failed producer
// sends the error instead of data, so the consumer fails with it rather than waiting
// forever.
struct TupleHeader {
  enum Kind : uint8_t {
    kInput = 0,       // input `input` of shard `shard` of `node`
    kCollective = 1,  // a host's partial for collective op `input` of `node`; `shard` is
                      // the sending host's index in the gang's sorted host list
    kRows = 2,        // sparse exchange: the rows producer shard `part` routed to input
                      // `input` of shard `shard` of `node`; `pieces` producers send
  };
  uint8_t kind = kInput;
  uint64_t run_id = 0;
  uint32_t node = 0;
  uint32_t input = 0;
  uint32_t shard = 0;
  DType dtype = DType::kF32;
  Shape shape;
  int32_t error_code = 0;  // atl::Code; non-zero: no data frame content
  std::string error;
  // kInput, resharding: where this piece goes in the consumer's shard (size and begin are
  // the sender's business: `shape` is the piece's).
  Shape dst_begin;
  Shape dst_shape;
  uint32_t pieces = 0;  // how many make the consumer's shard; 0: this is the whole shard
  uint32_t part = 0;    // kRows: the sender's index among the `pieces`
  bool packed = false;  // the bytes are in the batch's packed frame (an error has none)
  bool operator==(const TupleHeader&) const = default;
  // A batch holds one per tuple: the fields a plain tuple leaves unset come last, and are
  // left out (see msgpack_trimmed.h).
  MSGPACK_DEFINE_TRIMMED(kind, run_id, node, input, shard, dtype, shape, packed, pieces, part,
                         dst_begin, dst_shape, error_code, error);
};

struct TupleBatch {
  static constexpr Kind kKind = Kind::kTupleBatch;
  std::vector<TupleHeader> tuples;
  bool operator==(const TupleBatch&) const = default;
  MSGPACK_DEFINE(tuples);
};

// ---------------------------------------------------------------------------------------
// Scheduler.

struct PlacedEntry {
  std::string executor;  // the executor's control endpoint
  Entry entry;
  bool operator==(const PlacedEntry&) const = default;
  MSGPACK_DEFINE(executor, entry);
};

// Client -> island scheduler: the whole subgraph of one program run on this island, its
// entries grouped by node in topological order. Answered with SubmitReply or Error.
struct SubmitProgram {
  static constexpr Kind kKind = Kind::kSubmitProgram;
  uint64_t client_id = 0;
  uint64_t run_id = 0;
  std::vector<PlacedEntry> entries;
  // The client's share under proportional-share scheduling (relative to other clients').
  double weight = 1.0;
  bool operator==(const SubmitProgram&) const = default;
  MSGPACK_DEFINE(client_id, run_id, entries, weight);
};

// The program was accepted and its gangs queued; they get their places in the island's
// order when the scheduling policy releases them.
struct SubmitReply {
  static constexpr Kind kKind = Kind::kSubmitReply;
  uint32_t gangs = 0;
  bool operator==(const SubmitReply&) const = default;
  MSGPACK_DEFINE(gangs);
};

// Executor -> scheduler (on the scheduler's own DEALER): all of this executor's shards of
// one gang finished. Sent once per gang and executor, in the loop turn that saw the last of
// them, so a gang costs its scheduler one message per executor it spans, however many
// shards. The scheduler's policy learns from it what is in flight.
struct GangDone {
  static constexpr Kind kKind = Kind::kGangDone;
  uint64_t gang_seq = 0;
  uint32_t shards = 0;     // how many of the gang's shards this report covers
  uint64_t busy_us = 0;    // the longest of those shards' time on its device
  int32_t error_code = 0;  // atl::Code of a failed shard among them; 0: none failed
  bool operator==(const GangDone&) const = default;
  MSGPACK_DEFINE(gang_seq, shards, busy_us, error_code);
};

// ---------------------------------------------------------------------------------------
// Object store.

struct StoreHello {
  static constexpr Kind kKind = Kind::kStoreHello;
  bool operator==(const StoreHello&) const = default;
  MSGPACK_DEFINE();
};

// The store's shared-memory region holds the host arena first, then each local device's
// memory; every offset the store gives is an offset into the whole region.
struct StoreHelloReply {
  static constexpr Kind kKind = Kind::kStoreHelloReply;
  std::string arena_name;     // POSIX shared-memory name of the region, for shm_open
  uint64_t arena_bytes = 0;   // the host arena
  uint64_t region_bytes = 0;  // the whole region: the arena and every device's memory
  bool operator==(const StoreHelloReply&) const = default;
  MSGPACK_DEFINE(arena_name, arena_bytes, region_bytes);
};

// Reserves space for one shard, in the host arena or in a local device's memory; the
// caller writes the bytes through its own mapping of the region and then sends SealObject.
// Backpressure: a device shard that does not fit now is answered once it fits, in the order
// such requests came; one that can never fit is refused at once (OutOfMemory), and its
// readers get that error.
struct CreateObject {
  static constexpr Kind kKind = Kind::kCreateObject;
  static constexpr int32_t kHost = -1;
  uint64_t object_id = 0;
  uint32_t shard = 0;
  uint64_t owner_client = 0;
  DType dtype = DType::kF32;
  Shape shape;
  int32_t device = kHost;  // the local device whose memory holds it; kHost: the arena
  bool operator==(const CreateObject&) const = default;
  MSGPACK_DEFINE(object_id, shard, owner_client, dtype, shape, device);
};

struct CreateObjectReply {
  static constexpr Kind kKind = Kind::kCreateObjectReply;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  bool operator==(const CreateObjectReply&) const = default;
  MSGPACK_DEFINE(offset, nbytes);
};

// Marks a created shard ready (or failed, with error_code != 0) and wakes its waiters.
struct SealObject {
  static constexpr Kind kKind = Kind::kSealObject;
  uint64_t object_id = 0;
  uint32_t shard = 0;
  int32_t error_code = 0;
  std::string error;
  bool operator==(const SealObject&) const = default;
  MSGPACK_DEFINE(object_id, shard, error_code, error);
};

// Create + copy + seal in one message, the bytes in data frame 0: for callers that do not
// map the arena (a client on another machine).
struct PutObject {
  static constexpr Kind kKind = Kind::kPutObject;
  uint64_t object_id = 0;
  uint32_t shard = 0;
  uint64_t owner_client = 0;
  DType dtype = DType::kF32;
  Shape shape;
  bool operator==(const PutObject&) const = default;
  MSGPACK_DEFINE(object_id, shard, owner_client, dtype, shape);
};

// Waits up to timeout_ms for the shard to be sealed (0: answer at once). The reply
// carries the bytes as data frame 0 when `inline_data`, else only where they lie.
struct GetObject {
  static constexpr Kind kKind = Kind::kGetObject;
  uint64_t object_id = 0;
  uint32_t shard = 0;
  uint32_t timeout_ms = 0;
  bool inline_data = true;
  bool operator==(const GetObject&) const = default;
  MSGPACK_DEFINE(object_id, shard, timeout_ms, inline_data);
};

struct GetObjectReply {
  static constexpr Kind kKind = Kind::kGetObjectReply;
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  bool operator==(const GetObjectReply&) const = default;
  MSGPACK_DEFINE(dtype, shape, offset, nbytes);
};

// Drops one reference; the object (all its shards on this host) is freed at zero.
struct ReleaseObject {
  static constexpr Kind kKind = Kind::kReleaseObject;
  uint64_t object_id = 0;
  bool operator==(const ReleaseObject&) const = default;
  MSGPACK_DEFINE(object_id);
};

struct GetStoreStats {
  static constexpr Kind kKind = Kind::kGetStoreStats;
  bool operator==(const GetStoreStats&) const = default;
  MSGPACK_DEFINE();
};

struct StoreStats {
  static constexpr Kind kKind = Kind::kStoreStats;
  uint64_t objects = 0;
  uint64_t bytes_in_use = 0;  // of the host arena
  uint64_t arena_bytes = 0;
  std::map<uint64_t, uint64_t> objects_per_owner;
  std::vector<uint64_t> device_bytes_in_use;  // per local device
  std::vector<uint64_t> device_bytes;         // per local device: its whole memory
  bool operator==(const StoreStats&) const = default;
  MSGPACK_DEFINE(objects, bytes_in_use, arena_bytes, objects_per_owner, device_bytes_in_use,
                 device_bytes);
};

}  // namespace atl::proto
