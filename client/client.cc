#include "atoll/client.h"

#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>

#include "client/client_impl.h"
#include "client/heartbeat.h"
#include "client/internal.h"
#include "client/lowering.h"
#include "client/peers.h"
#include "client/reads_ledger.h"
#include "client/run_state.h"
#include "client/sharding.h"
#include "common/net/tensor_frames.h"
#include "common/net/transport.h"
#include "common/proto/ids.h"

namespace atl {

namespace {

// Submissions to one island scheduler that may go unanswered at once: below the ZeroMQ
// high-water mark (1,000 messages) of the scheduler's queue of answers to this client.
constexpr size_t kMaxUnacked = 256;

// The shards of `results` worth reading ahead: those of the results the run makes (not its
// arguments, nor earlier runs' futures) of at most ReadAhead::kMaxResultBytes.
std::vector<ReadAhead::Shard> ReadAheadShards(const std::vector<ResultPlan>& results) {
  std::vector<ReadAhead::Shard> shards;
  for (const ResultPlan& r : results) {
    if (r.arg_index >= 0 || r.borrowed_arg >= 0) continue;
    const auto bytes = static_cast<uint64_t>(NumElements(r.type.shape)) * DTypeSize(r.type.dtype);
    if (bytes > ReadAhead::kMaxResultBytes) continue;
    for (const ResultShard& s : r.shards) shards.push_back({s.store, s.object_id, s.shard, bytes});
  }
  return shards;
}

}  // namespace

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
  client->failed.erase(id);
  client->live_runs.erase(id);
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() {
  if (!impl_) return;
  // Runs held for their readers go now, while the client they release through is whole.
  impl_->reads.TakeAll();
  impl_->heartbeat.reset();
  const auto timeout = std::chrono::milliseconds(1000);
  (void)impl_->rm->Call<proto::Ok>(proto::Goodbye{impl_->id}, timeout);
  // Waiting for each reply also flushes the releases posted before on the same socket.
  for (const auto& watcher : impl_->watchers) {
    (void)impl_->peers.at(watcher)->Call<proto::Ok>(proto::Goodbye{impl_->id}, timeout);
  }
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
  impl->notice_period =
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

Result<Run> Client::Submit(const Program& program, const std::vector<Input>& args,
                           const SubmitOptions& options) {
  if (!program.impl_) return InvalidArgument("submit of an empty Program");
  impl_->ApplyNotices();
  auto run = std::make_shared<RunState>();
  run->client = impl_.get();
  run->id = impl_->NextRunId();
  std::vector<LoweringArg> lowering_args;
  std::vector<ReadsLedger::KeepAlive> reads;
  for (size_t i = 0; i < args.size(); ++i) {
    if (const Future* f = args[i].future()) {
      if (!f->run_ || f->index_ >= f->run_->results.size()) {
        return InvalidArgument(fmt::format("argument {} is an empty Future", i));
      }
      if (f->run_->cancelled) {
        return Cancelled(
            fmt::format("argument {} is a future of run {}, which was cancelled", i, f->run_->id));
      }
      lowering_args.push_back({nullptr, &f->run_->results[f->index_]});
      reads.push_back(f->run_);
    } else {
      lowering_args.push_back({args[i].value(), nullptr});
    }
  }
  ATOLL_ASSIGN_OR_RETURN(LoweredRun lowered,
                         Lower(*program.impl_, lowering_args, impl_->id, run->id, options,
                               impl_->options.weight, [this] { return impl_->NextObjectId(); }));
  AddPeers(lowered.per_scheduler);
  // Results that are argument values are answered from the client's own copy, kept for
  // those arguments only.
  run->arg_values.resize(args.size());
  for (const auto& r : lowered.results) {
    if (r.arg_index >= 0 && args[r.arg_index].value() != nullptr) {
      run->arg_values[r.arg_index] = *args[r.arg_index].value();
    }
  }
  run->objects = OwnedObjects(lowered);
  for (const auto& r : lowered.results) {
    if (r.borrowed_arg >= 0) run->borrowed.push_back(args[r.borrowed_arg].future()->run_);
  }
  run->results = std::move(lowered.results);
  impl_->read_ahead.Add(run->id, ReadAheadShards(run->results));
  for (const auto& [endpoint, submit] : lowered.per_scheduler) run->schedulers.insert(endpoint);
  run->needs_schedulers = run->schedulers;
  for (const auto& owned : run->objects) run->needs_stores.insert(owned.store);
  for (const auto& call : program.impl_->calls) {
    for (const auto& device : call.fn->slice.devices) run->needs_hosts.insert(device.host);
  }
  if (!impl_->CheckUp(*run).ok()) {
    // The service may be back already, its notice on the way: whoever saw it come back on
    // the event stream and submitted at once must not be refused for a notice in flight.
    zmq::pollitem_t rm_readable{impl_->rm->socket().handle(), 0, ZMQ_POLLIN, 0};
    (void)zmq::poll(&rm_readable, 1, impl_->notice_period);
    impl_->ApplyNotices();
    ATOLL_RETURN_IF_ERROR(impl_->CheckUp(*run));
  }
  // What its inputs' producers need, it needs too, until they are done.
  for (const auto& a : args) {
    const Future* f = a.future();
    if (f == nullptr) continue;
    const RunState& read = *f->run_;
    run->needs_schedulers.insert(read.needs_schedulers.begin(), read.needs_schedulers.end());
    run->needs_stores.insert(read.needs_stores.begin(), read.needs_stores.end());
    run->needs_hosts.insert(read.needs_hosts.begin(), read.needs_hosts.end());
    for (const auto& shard : read.results[f->index_].shards) run->needs_stores.insert(shard.store);
  }
  run->losses_seen = impl_->losses.size();

  const auto timeout = impl_->options.request_timeout;
  for (auto& put : lowered.puts) {
    ATOLL_ASSIGN_OR_RETURN(net::Requester * store, impl_->Watcher(put.store));
    const proto::PutObject request{put.object_id, put.shard, impl_->id, put.value.dtype(),
                                   put.value.shape()};
    net::Frames data;
    data.push_back(net::BorrowedFrame(std::move(put.value)));
    ATOLL_RETURN_IF_ERROR(store->Call<proto::Ok>(request, timeout, std::move(data))
                              .status()
                              .WithContext("put argument"));
  }
  // Streamed: the scheduler's answer is read later (DrainAcks), so back-to-back calls cost
  // no round trip each. At most kMaxUnacked go unanswered: the scheduler's answers queue in
  // its ROUTER, which would lose those past its high-water mark.
  for (const auto& [endpoint, submit] : lowered.per_scheduler) {
    if (impl_->unacked[endpoint].size() >= kMaxUnacked) {
      impl_->DrainAcks(timeout, kMaxUnacked - 1);
      if (impl_->unacked[endpoint].size() >= kMaxUnacked) {
        return DeadlineExceeded(
            fmt::format("island scheduler {} answered none of the last {} submissions within {} ms",
                        endpoint, kMaxUnacked, timeout.count()));
      }
    }
    ATOLL_ASSIGN_OR_RETURN(net::Requester * scheduler, impl_->Watcher(endpoint));
    ATOLL_ASSIGN_OR_RETURN(uint64_t request, scheduler->Send(submit));
    impl_->unacked[endpoint][request] = run->id;
    impl_->acks_missing[run->id]++;
  }
  impl_->reads.Hold(run->id, run->schedulers, std::move(reads));
  for (const auto& r : run->results) {
    for (const auto& s : r.shards) (void)impl_->Watcher(s.store);
  }
  impl_->DrainAcks(std::chrono::milliseconds(0));
  return Run(std::move(run));
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
