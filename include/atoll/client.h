// The atoll client library: connect to a cluster, get virtual slices of devices,
// register compiled functions on them, trace programs, run them and wait for results, save
// results to checkpoints and load them back.
//
// Thread safety: a Client is used by one thread at a time. It runs one background thread
// of its own that heartbeats the RM and the object stores, so that a client that dies has
// its slices and objects collected.
//
// Example:
//   auto client = atl::Client::Connect({.rm_endpoint = "tcp://127.0.0.1:5550"});
//   auto slice = (*client)->CreateSlice(2);
//   ... register functions, trace a program ...
//   auto run = (*client)->Submit(program, {atl::Tensor::F32({2}, {1, 2})});
//   auto outputs = run->Wait(std::chrono::seconds(10));
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "atoll/function.h"
#include "atoll/program.h"
#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl {

struct ClientOptions {
  std::string rm_endpoint;
  std::string name = "client";
  // Bound on every request to a service (not on waiting for results: see Run::Wait).
  std::chrono::milliseconds request_timeout{10000};
  // This client's share of devices, relative to other clients', when island schedulers
  // use proportional share.
  double weight = 1.0;
  // CURVE keys (made by `atoll keygen` or `atoll up`): the keys directory, "plain" for a
  // cluster whose security.mode is "plain", or empty: $ATOLL_KEYS (the same), else
  // $ATOLL_HOME (or ~/.atoll)/keys when it exists, else plain text.
  std::string keys_dir = "";
  // Which client key of the directory: empty: $ATOLL_CLIENT_KEY, else "default".
  std::string key_name = "";
};

struct SubmitOptions {
  // Sequential dispatch: each node's host-side work starts only once the previous node
  // finished everywhere (one controller round trip per node). The baseline parallel
  // dispatch is measured against, and what irregular nodes need.
  bool sequential = false;
};

// A virtual slice: devices the RM mapped for this client, all on one island, seen as a
// mesh (row-major; 1-D unless made by CreateMeshSlice).
class Slice {
 public:
  uint64_t id() const { return id_; }
  const std::string& island() const { return island_; }
  int num_devices() const { return num_devices_; }
  const Shape& mesh() const { return mesh_; }

 private:
  friend class Client;
  uint64_t id_ = 0;
  std::string island_;
  int num_devices_ = 0;
  Shape mesh_;
};

// A function compiled on a slice.
class Function {
 public:
  uint64_t id() const;
  const std::string& name() const;
  uint64_t slice_id() const;

  struct Impl;  // opaque: defined inside the library

 private:
  friend class Client;
  friend class ProgramBuilder;
  friend struct HandleAccess;  // inside the library (client/internal.h)
  std::shared_ptr<const Impl> impl_;
};

class Client;
struct RunState;

// A future for one result of a submitted run: it can be passed as an argument to the next
// Submit before the value exists (no round trip), as long as the consuming function's
// shards sit on the hosts that hold the result's shards. Keeps the run's objects alive;
// a run that consumes it keeps them alive too, but only until its own computations have
// read them (its schedulers say so), so a loop that feeds each step's output to the next
// step holds only the last steps' objects.
class Future {
 public:
  DType dtype() const;
  const Shape& shape() const;

 private:
  friend class Run;
  friend class Client;
  std::shared_ptr<RunState> run_;
  size_t index_ = 0;
};

// A program argument: a value from the client, or a future of an earlier run.
class Input {
 public:
  Input(Tensor value) : value_(std::move(value)) {}     // NOLINT: implicit by design
  Input(Future future) : future_(std::move(future)) {}  // NOLINT
  const Tensor* value() const { return future_ ? nullptr : &value_; }
  const Future* future() const { return future_ ? &*future_ : nullptr; }

 private:
  Tensor value_;
  std::optional<Future> future_;
};

// A submitted program run: futures for its results. The run's objects in the object
// stores are released once the Run and every Future of it are gone (or once it is
// cancelled), each exactly once. Must not outlive its Client.
class Run {
 public:
  uint64_t id() const;
  // Stops the run: its computations still queued are dropped, a running one stops at its
  // next check (between ops, and every millisecond of a spin), its devices go on with the
  // next program at once, and its objects are released. Wait on it then returns Cancelled
  // at once; so do the computations of other runs still waiting to read its futures, and
  // a later Submit given one of them. Posted without waiting for an answer; an error says
  // that a scheduler could not be told. Cancelling again does nothing.
  Status Cancel();
  // Waits until every result is ready (at most `timeout`) and returns them assembled from
  // their shards. A refused submission or a failed computation's error comes back here,
  // naming the node and shard.
  Result<std::vector<Tensor>> Wait(std::chrono::milliseconds timeout);
  // The same for result `index` alone; the others stay in the object stores, e.g. weights
  // that the next run reads as Futures.
  Result<Tensor> Wait(size_t index, std::chrono::milliseconds timeout);
  // Waits until every result is computed (at most `timeout`) and reads none back: they stay
  // in the object stores, for later runs or reads (jax's block_until_ready). Errors as
  // Wait's.
  Status WaitDone(std::chrono::milliseconds timeout);
  // A future for result `index`, to feed a later Submit.
  Future Output(size_t index) const;

 private:
  friend class Client;
  explicit Run(std::shared_ptr<RunState> state) : state_(std::move(state)) {}
  std::shared_ptr<RunState> state_;
};

// A checkpoint loaded by Client::Load: result i of `run` is the tensor names[i], in the
// object stores of the slice it was loaded onto, owned by the client like a run's results:
// run.Output(i) feeds later runs, run.Wait(i) reads a value back.
struct Checkpoint {
  std::vector<std::string> names;
  Run run;
};

// Which devices a slice may have. A request no island can meet is refused (NotFound for an
// island without such devices, FailedPrecondition when no island has enough), naming what
// was asked for.
struct SliceOptions {
  std::string island = "";  // empty: any island
  // The devices' kind, as the hosts' config gives it ([[islands.hosts]] kind): "cpu" (real
  // kernels) or "sim" (simulated hosts); empty: any kind.
  std::string kind = "";
};

struct LoadOptions {
  // The tensors to load, in this order; empty: every one, in the order they were saved.
  std::vector<std::string> names = {};
  // How to lay tensors out over the slice's mesh, by name. A tensor not named here is cut
  // along the mesh axes it was saved with (the slice's mesh must have them, and each cut
  // dimension must divide over its axis); any layout of the same global tensor loads.
  std::map<std::string, Sharding> shardings = {};
  // Bound on the whole load (reading the index, every store's reading of its shards).
  std::chrono::milliseconds timeout{60000};
};

class Client {
 public:
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  ~Client();  // says goodbye: the RM and object stores free what this client held

  uint64_t id() const;

  // Asks the RM for `num_devices` devices on `island` (empty: any island).
  Result<Slice> CreateSlice(uint32_t num_devices, const std::string& island = "");
  // The same, with the devices' island and kind (SliceOptions).
  Result<Slice> CreateSlice(uint32_t num_devices, const SliceOptions& options);
  // The same for a mesh of devices, e.g. {2, 4}: 8 devices, 2 rows of 4.
  Result<Slice> CreateMeshSlice(const Shape& mesh, const std::string& island = "");
  Result<Slice> CreateMeshSlice(const Shape& mesh, const SliceOptions& options);
  // Registers and compiles a function on every device of `slice`.
  Result<Function> Register(const FunctionBuilder& builder, const Slice& slice);
  // Lowers `program` onto the physical devices, puts value arguments into the object
  // stores and sends each island's scheduler one message, without waiting for its answer
  // (Run::Wait reports a refusal). Returns without waiting for results. At most 256
  // submissions to one scheduler go unanswered: past that, Submit waits for an answer, up
  // to the request timeout (then DeadlineExceeded, naming the scheduler).
  Result<Run> Submit(const Program& program, const std::vector<Input>& args,
                     const SubmitOptions& options = {});

  // Checkpoints (README, "Checkpoints"). `path` is a directory relative to each object
  // store's checkpoint root ([checkpoints] root; below the client key's name under CURVE);
  // absolute paths, '..' and symbolic links are refused. Across machines each host's store
  // writes under its own root: loading on other hosts needs a shared filesystem or a copy.

  // Saves `tensors` under their names into `path`: one numpy .npy file per distinct block
  // of each future (written by the object store that holds it, the bytes never passing
  // through this client; the futures' runs are waited for, at most `timeout` in all) and
  // one per value (written by every store taking part), then the index (index.json), last.
  // A checkpoint saved over stays whole until the new index replaces the old one; files it
  // no longer names are removed then. Names: 1 to 128 of [A-Za-z0-9_.-], not starting with
  // '.'. At least one tensor must be a future. One save at a time per path.
  Status Save(const std::vector<std::pair<std::string, Input>>& tensors, const std::string& path,
              std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Loads tensors of the checkpoint at `path` onto `slice`: the index is read by the store
  // of the slice's first device's host, and each device's host's store reads its shard into
  // a new object of this client's. NotFound for a checkpoint without an index (never
  // saved, or a save that did not finish) or a missing file; InvalidArgument for a corrupt
  // file or index (sizes, CRC-32, .npy header) or a layout that does not fit the slice.
  Result<Checkpoint> Load(const std::string& path, const Slice& slice,
                          const LoadOptions& options = {});

  struct Impl;  // opaque: defined inside the library

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend class Run;
  friend struct RunState;
};

}  // namespace atl
