#include "atoll/client.h"

#include <limits>
#include <map>
#include <random>

#include <fmt/format.h>

#include "client/client_impl.h"
#include "client/heartbeat.h"
#include "client/internal.h"
#include "client/run_state.h"
#include "common/net/transport.h"
#include "common/proto/ids.h"

namespace atl {

void RunState::ReleaseObjects() {
  // Where a read ahead of the run is still open, the release follows it on its socket.
  const std::map<std::string, net::Requester*> reading = client->read_ahead.Drop(id);
  for (const auto& owned : objects) {
    auto it = reading.find(owned.store);
    Result<net::Requester*> peer =
        it != reading.end() ? Result<net::Requester*>(it->second) : client->Peer(owned.store);
    if (peer.ok()) {
      (void)(*peer)->Post(proto::ReleaseObject{owned.object_id, client->id, owned.shards});
    }
  }
  objects.clear();
}

RunState::~RunState() {
  ReleaseObjects();
  client->submissions.Ended(id);
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() {
  if (!impl_) return;
  // Runs held for their readers go now, while the client they release through is whole.
  impl_->reads.TakeAll();
  impl_->heartbeat.reset();
  const auto timeout = std::chrono::milliseconds(1000);
  // The stores and schedulers first: told by the RM, they would collect what this client
  // left as lapsed. Waiting for each reply also flushes the releases posted before on the
  // same socket.
  for (const auto& watcher : impl_->watchers) {
    (void)impl_->peers.at(watcher)->Call<proto::Ok>(proto::Goodbye{impl_->id}, timeout);
  }
  (void)impl_->rm->Call<proto::Ok>(proto::Goodbye{impl_->id}, timeout);
}

uint64_t Client::id() const { return impl_->id; }

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  if (options.rm_endpoint.empty()) return InvalidArgument("no RM endpoint given");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  ATOLL_ASSIGN_OR_RETURN(net::Credentials credentials,
                         net::FindClientCredentials(options.keys_dir, options.key_name));
  net::SetCredentials(impl->context, std::move(credentials));
  impl->rm = std::make_unique<net::Requester>(impl->context, options.rm_endpoint);
  // Named by the client, not by the RM's socket: a restarted RM still reaches it with notices.
  std::random_device random;
  impl->rm->socket().set(zmq::sockopt::routing_id,
                         fmt::format("client-{:08x}{:08x}", random(), random()));
  ATOLL_RETURN_IF_ERROR(impl->rm->Connect(/*watch_handshakes=*/true));
  impl->heartbeat = std::make_unique<HeartbeatThread>(impl->context, options.rm_endpoint);
  // The RM counts this client's silence from its hello: its beats must reach the RM by then.
  ATOLL_RETURN_IF_ERROR(impl->heartbeat->WaitConnected(options.request_timeout));
  ATOLL_ASSIGN_OR_RETURN(auto hello,
                         impl->rm->Call<proto::HelloClientReply>(proto::HelloClient{options.name},
                                                                 options.request_timeout));
  impl->id = hello.client_id;
  impl->losses.notice_period =
      std::max(std::chrono::milliseconds(1), std::chrono::milliseconds(hello.heartbeat_ms) / 4);
  impl->heartbeat->Start(impl->id, std::chrono::milliseconds(hello.heartbeat_ms));
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Result<Slice> Client::CreateSlice(uint32_t num_devices, const std::string& island) {
  return CreateMeshSlice({num_devices}, SliceOptions{.island = island});
}

Result<Slice> Client::CreateSlice(uint32_t num_devices, const SliceOptions& options) {
  return CreateMeshSlice({num_devices}, options);
}

Result<Slice> Client::CreateMeshSlice(const Shape& mesh, const std::string& island) {
  return CreateMeshSlice(mesh, SliceOptions{.island = island});
}

Result<Slice> Client::CreateMeshSlice(const Shape& mesh, const SliceOptions& options) {
  int64_t num_devices = 1;
  for (int64_t extent : mesh) {
    if (extent <= 0 || extent > std::numeric_limits<uint32_t>::max() / num_devices) {
      return InvalidArgument("a slice's mesh needs positive axes, got " + ShapeString(mesh));
    }
    num_devices *= extent;
  }
  ATOLL_ASSIGN_OR_RETURN(auto info,
                         impl_->rm->Call<proto::SliceInfo>(
                             proto::CreateSlice{impl_->id, static_cast<uint32_t>(num_devices),
                                                options.island, options.kind},
                             impl_->options.request_timeout));
  Slice slice;
  slice.id_ = info.slice_id;
  slice.island_ = info.island;
  slice.num_devices_ = static_cast<int>(info.devices.size());
  slice.mesh_ = mesh;
  impl_->slices[info.slice_id] = std::move(info);
  return slice;
}

Result<Function> Client::Register(const FunctionBuilder& builder, const Slice& slice) {
  ATOLL_RETURN_IF_ERROR(builder.status());
  auto it = impl_->slices.find(slice.id());
  if (it == impl_->slices.end()) {
    return NotFound(fmt::format("slice {} was not made by this client", slice.id()));
  }
  ir::FunctionDef def = builder.impl_->def;
  def.mesh = slice.mesh();
  ATOLL_ASSIGN_OR_RETURN(auto reply, impl_->rm->Call<proto::RegisterFunctionReply>(
                                         proto::RegisterFunction{impl_->id, slice.id(), def},
                                         impl_->options.request_timeout));
  auto fn = std::make_shared<Function::Impl>();
  fn->id = reply.function_id;
  fn->def = def;
  fn->output_types = ir::OutputTypes(def);
  fn->slice = it->second;
  impl_->functions[slice.id()].push_back(fn);
  Function f;
  f.impl_ = std::move(fn);
  return f;
}

uint64_t Run::id() const { return state_->id; }

Status Run::Cancel() {
  RunState& run = *state_;
  if (run.cancelled) return Status::Ok();
  run.cancelled = true;
  Client::Impl& client = *run.client;
  Status status;
  for (const auto& endpoint : run.schedulers) {
    Status sent = [&]() -> Status {
      ATOLL_ASSIGN_OR_RETURN(net::Requester * scheduler, client.Peer(endpoint));
      return scheduler->Post(proto::CancelRun{client.id, run.id, ""});
    }();
    if (!sent.ok() && status.ok()) status = sent.WithContext("cancel at scheduler " + endpoint);
  }
  // The stores free what exists now once it is sealed (a cancelled shard seals its outputs
  // with Cancelled), and remember the rest until it is created.
  run.ReleaseObjects();
  return status;
}

Future Run::Output(size_t index) const {
  Future f;
  f.run_ = state_;
  f.index_ = index;
  return f;
}

DType Future::dtype() const { return run_->results.at(index_).type.dtype; }
const Shape& Future::shape() const { return run_->results.at(index_).type.shape; }

}  // namespace atl
