// The atoll client library: connect to a cluster, get virtual slices of devices,
// register compiled functions on them, trace programs, run them and wait for results.
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
#include <memory>
#include <string>
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
};

struct SubmitOptions {
  // Sequential dispatch: each node's host-side work starts only once the previous node
  // finished everywhere (one controller round trip per node). The baseline parallel
  // dispatch is measured against, and what irregular nodes need.
  bool sequential = false;
};

// A virtual slice: devices the RM mapped for this client, all on one island.
class Slice {
 public:
  uint64_t id() const { return id_; }
  const std::string& island() const { return island_; }
  int num_devices() const { return num_devices_; }

 private:
  friend class Client;
  uint64_t id_ = 0;
  std::string island_;
  int num_devices_ = 0;
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
  std::shared_ptr<const Impl> impl_;
};

class Client;

// A submitted program run: futures for its results. Must not outlive its Client.
class Run {
 public:
  Run(Run&&) noexcept;
  Run& operator=(Run&&) noexcept;
  ~Run();  // releases the run's objects if Wait never did

  uint64_t id() const;
  // Waits until every result is ready (at most `timeout`) and returns them assembled
  // from their shards; then releases the run's objects in the object stores. A failed
  // computation's error comes back here, naming the node and shard.
  Result<std::vector<Tensor>> Wait(std::chrono::milliseconds timeout);

  struct Impl;  // opaque: defined inside the library

 private:
  friend class Client;
  explicit Run(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Client {
 public:
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  ~Client();  // says goodbye: the RM and object stores free what this client held

  uint64_t id() const;

  // Asks the RM for `num_devices` devices on `island` (empty: any island).
  Result<Slice> CreateSlice(uint32_t num_devices, const std::string& island = "");
  // Registers and compiles a function on every device of `slice`.
  Result<Function> Register(const FunctionBuilder& builder, const Slice& slice);
  // Lowers `program` onto the physical devices, puts `args` into the object stores and
  // sends each island's scheduler one message. Returns without waiting for results.
  Result<Run> Submit(const Program& program, const std::vector<Tensor>& args,
                     const SubmitOptions& options = {});

  struct Impl;  // opaque: defined inside the library

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend class Run;
};

}  // namespace atl
