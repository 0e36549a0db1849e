// Messages executors handle or send: compiling, dispatch and the data plane. See protocol.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "common/proto/message_kind.h"
#include "common/proto/msgpack_trimmed.h"

namespace atl::proto {

// RM -> executor: compile (here: validate and keep) a function ahead of its first call.
// Answered with Ok or Error carrying the same request id.
struct Compile {
  static constexpr Kind kKind = Kind::kCompile;
  uint64_t function_id = 0;
  uint32_t num_shards = 0;
  ir::FunctionDef function;
  // The data endpoint of the executor that runs each shard: where collectives meet.
  std::vector<std::string> shard_endpoints;
  uint32_t slice_mapping = 0;  // the mapping of its slice those endpoints are (SliceInfo)
  bool operator==(const Compile&) const = default;
  MSGPACK_DEFINE(function_id, num_shards, function, shard_endpoints, slice_mapping);
};

// Where one input of a shard comes from.
struct InputSource {
  enum Kind : uint8_t {
    kTuple = 0,   // pushed by the producing executor, keyed (run, node, input, shard)
    kStore = 1,   // shard `shard` of object `object_id` in this host's object store
    kInline = 2,  // the value itself (dtype, shape, bytes): a small argument that came with
                  // the submission, so that no object-store round trip precedes the run
  };
  uint8_t kind = kTuple;
  uint64_t object_id = 0;
  uint32_t shard = 0;
  DType dtype = DType::kF32;  // kInline: the value
  Shape shape = {};
  std::vector<char> bytes = {};
  bool operator==(const InputSource&) const = default;
  MSGPACK_DEFINE_TRIMMED(kind, object_id, shard, dtype, shape, bytes);
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
  MSGPACK_DEFINE_TRIMMED(of, begin, size, dst_begin, dst_shape);
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
  MSGPACK_DEFINE_TRIMMED(kind, data_endpoint, node, input, shard, object_id, piece, route_by,
                         route_shards);
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
  // Not 0 (an atl::Code): the scheduler gave up on this gang, `error` says why; run
  // nothing and fail its consumers and results with that error.
  int32_t error_code = 0;
  std::string error;
  // The mapping of the function's slice the run was lowered for (SliceInfo::mapping): a
  // function compiled here for another runs its shards elsewhere, so this one is refused
  // rather than wait in a collective for partners that are not coming.
  uint32_t slice_mapping = 0;
  bool operator==(const Entry&) const = default;
  // The wire order lists the fields most often set first, so that trimming drops the rest.
  MSGPACK_DEFINE_TRIMMED(run_id, node, gang_seq, function_id, device, shard, num_shards,
                         owner_client, slice_mapping, inputs, outputs, sequential, peers,
                         error_code, error);
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
    kInput = 0,            // input `input` of shard `shard` of `node`
    kCollective = 1,       // a host's items (partials or pieces) for collective op `input`
                           // of `node`; `shard` is the sending host's index in the gang's
                           // sorted host list
    kRows = 2,             // sparse exchange: the rows producer shard `part` routed to input
                           // `input` of shard `shard` of `node`; `pieces` producers send
    kCollectiveTotal = 3,  // the totals a host needs of collective op `input` of `node`,
                           // from the gang's root (host index `shard`, 0)
  };
  bool collective() const { return kind == kCollective || kind == kCollectiveTotal; }
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

}  // namespace atl::proto
