#include "atoll/client.h"

#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "client/heartbeat.h"
#include "client/internal.h"
#include "client/lowering.h"
#include "client/sharding.h"
#include "common/transport.h"

namespace atl {

struct Client::Impl {
  ClientOptions options;
  zmq::context_t context;
  std::unique_ptr<net::Requester> rm;
  std::map<std::string, std::unique_ptr<net::Requester>> peers;  // schedulers and stores
  std::map<uint64_t, proto::SliceInfo> slices;                   // this client's, by id
  std::set<std::string> stores;  // object stores used: they hear Goodbye
  std::unique_ptr<HeartbeatThread> heartbeat;
  uint64_t id = 0;
  uint64_t next_run = 1;
  uint64_t next_object = 1;

  // The requester for a scheduler or object store, connected on first use.
  Result<net::Requester*> Peer(const std::string& endpoint) {
    auto it = peers.find(endpoint);
    if (it == peers.end()) {
      auto r = std::make_unique<net::Requester>(context, endpoint);
      ATOLL_RETURN_IF_ERROR(r->Connect());
      it = peers.emplace(endpoint, std::move(r)).first;
    }
    return it->second.get();
  }
  Result<net::Requester*> Store(const std::string& endpoint) {
    if (stores.insert(endpoint).second) heartbeat->AddStore(endpoint);
    return Peer(endpoint);
  }
  // Ids the client makes itself: unique per client, no round trip.
  uint64_t NextObjectId() { return (id << 40) | next_object++; }
  uint64_t NextRunId() { return (id << 32) | next_run++; }
};

struct Run::Impl {
  Client::Impl* client = nullptr;
  uint64_t id = 0;
  std::vector<ResultPlan> results;
  std::vector<Tensor> args;                               // for results that are arguments
  std::vector<std::pair<std::string, uint64_t>> objects;  // (store, id) to release
  bool released = false;

  void Release() {
    if (released) return;
    released = true;
    for (const auto& [store, object] : objects) {
      auto peer = client->Peer(store);
      if (peer.ok()) (void)(*peer)->Post(proto::ReleaseObject{object});
    }
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() {
  if (!impl_) return;
  impl_->heartbeat.reset();
  const auto timeout = std::chrono::milliseconds(1000);
  (void)impl_->rm->Call<proto::Ok>(proto::Goodbye{impl_->id}, timeout);
  // Waiting for each reply also flushes the releases posted before on the same socket.
  for (const auto& store : impl_->stores) {
    (void)impl_->peers.at(store)->Call<proto::Ok>(proto::Goodbye{impl_->id}, timeout);
  }
}

uint64_t Client::id() const { return impl_->id; }

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  if (options.rm_endpoint.empty()) return InvalidArgument("no RM endpoint given");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->rm = std::make_unique<net::Requester>(impl->context, options.rm_endpoint);
  ATOLL_RETURN_IF_ERROR(impl->rm->Connect());
  ATOLL_ASSIGN_OR_RETURN(auto hello,
                         impl->rm->Call<proto::HelloClientReply>(proto::HelloClient{options.name},
                                                                 options.request_timeout));
  impl->id = hello.client_id;
  impl->heartbeat = std::make_unique<HeartbeatThread>(
      impl->context, impl->id, options.rm_endpoint, std::chrono::milliseconds(hello.heartbeat_ms));
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Result<Slice> Client::CreateSlice(uint32_t num_devices, const std::string& island) {
  ATOLL_ASSIGN_OR_RETURN(auto info, impl_->rm->Call<proto::SliceInfo>(
                                        proto::CreateSlice{impl_->id, num_devices, island, ""},
                                        impl_->options.request_timeout));
  Slice slice;
  slice.id_ = info.slice_id;
  slice.island_ = info.island;
  slice.num_devices_ = static_cast<int>(info.devices.size());
  impl_->slices[info.slice_id] = std::move(info);
  return slice;
}

Result<Function> Client::Register(const FunctionBuilder& builder, const Slice& slice) {
  ATOLL_RETURN_IF_ERROR(builder.status());
  auto it = impl_->slices.find(slice.id());
  if (it == impl_->slices.end()) {
    return NotFound(fmt::format("slice {} was not made by this client", slice.id()));
  }
  const ir::FunctionDef& def = builder.impl_->def;
  ATOLL_ASSIGN_OR_RETURN(auto reply, impl_->rm->Call<proto::RegisterFunctionReply>(
                                         proto::RegisterFunction{impl_->id, slice.id(), def},
                                         impl_->options.request_timeout));
  auto fn = std::make_shared<Function::Impl>();
  fn->id = reply.function_id;
  fn->def = def;
  fn->output_types = ir::OutputTypes(def);
  fn->slice = it->second;
  Function f;
  f.impl_ = std::move(fn);
  return f;
}

Result<Run> Client::Submit(const Program& program, const std::vector<Tensor>& args,
                           const SubmitOptions& options) {
  if (!program.impl_) return InvalidArgument("submit of an empty Program");
  const uint64_t run_id = impl_->NextRunId();
  ATOLL_ASSIGN_OR_RETURN(
      LoweredRun lowered, Lower(*program.impl_, args, impl_->id, run_id, options,
                                impl_->options.weight, [this] { return impl_->NextObjectId(); }));
  auto run = std::make_unique<Run::Impl>();
  run->client = impl_.get();
  run->id = run_id;
  run->args = args;
  for (const auto& put : lowered.puts) run->objects.emplace_back(put.store, put.object_id);
  for (const auto& r : lowered.results) {
    for (const auto& s : r.shards) run->objects.emplace_back(s.store, s.object_id);
  }
  Run handle(std::move(run));  // from here on, a failure releases what was put

  const auto timeout = impl_->options.request_timeout;
  for (const auto& put : lowered.puts) {
    ATOLL_ASSIGN_OR_RETURN(net::Requester * store, impl_->Store(put.store));
    net::Frames data;
    data.emplace_back(put.value.data(), put.value.nbytes());
    ATOLL_RETURN_IF_ERROR(
        store
            ->Call<proto::Ok>(proto::PutObject{put.object_id, put.shard, impl_->id,
                                               put.value.dtype(), put.value.shape()},
                              timeout, std::move(data))
            .status()
            .WithContext("put argument"));
  }
  for (const auto& [endpoint, submit] : lowered.per_scheduler) {
    ATOLL_ASSIGN_OR_RETURN(net::Requester * scheduler, impl_->Peer(endpoint));
    ATOLL_RETURN_IF_ERROR(
        scheduler->Call<proto::SubmitReply>(submit, timeout).status().WithContext("submit"));
  }
  for (const auto& r : lowered.results) {
    for (const auto& s : r.shards) (void)impl_->Store(s.store);
  }
  handle.impl_->results = std::move(lowered.results);
  return handle;
}

Run::Run(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Run::Run(Run&&) noexcept = default;
Run& Run::operator=(Run&&) noexcept = default;
Run::~Run() {
  if (impl_) impl_->Release();
}

uint64_t Run::id() const { return impl_->id; }

Result<std::vector<Tensor>> Run::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<Tensor> out;
  for (size_t r = 0; r < impl_->results.size(); ++r) {
    const ResultPlan& plan = impl_->results[r];
    if (plan.arg_index >= 0) {
      out.push_back(impl_->args[plan.arg_index]);
      continue;
    }
    std::vector<Tensor> shards;
    for (const auto& s : plan.shards) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      const auto wait_ms = static_cast<uint32_t>(std::max<int64_t>(left.count(), 1));
      ATOLL_ASSIGN_OR_RETURN(net::Requester * store, impl_->client->Store(s.store));
      net::Frames data;
      auto reply = store->Call<proto::GetObjectReply>(
          proto::GetObject{s.object_id, s.shard, wait_ms, true},
          std::chrono::milliseconds(wait_ms) + impl_->client->options.request_timeout, {}, &data);
      const std::string what = fmt::format("run {} result {} shard {}", impl_->id, r, s.shard);
      if (!reply.ok()) return reply.status().WithContext(what);
      if (data.size() != 1) return Internal(what + ": reply carries no data frame");
      std::vector<std::byte> bytes(data[0].size());
      if (!bytes.empty()) std::memcpy(bytes.data(), data[0].data(), bytes.size());
      ATOLL_ASSIGN_OR_RETURN(Tensor t,
                             Tensor::FromBytes(reply->dtype, reply->shape, std::move(bytes)));
      shards.push_back(std::move(t));
    }
    ATOLL_ASSIGN_OR_RETURN(Tensor whole, Assemble(shards, plan.type.split_dim));
    out.push_back(std::move(whole));
  }
  impl_->Release();
  return out;
}

}  // namespace atl
