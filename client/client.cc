#include "atoll/client.h"

#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>

#include "client/heartbeat.h"
#include "client/internal.h"
#include "client/lowering.h"
#include "client/peers.h"
#include "client/reads_ledger.h"
#include "client/run_state.h"
#include "client/sharding.h"
#include "common/net/transport.h"
#include "common/proto/ids.h"

namespace atl {

struct Client::Impl {
  ~Impl() { net::ForgetCredentials(context); }

  ClientOptions options;
  // Three sockets per store and scheduler it uses (a watched Requester): room for a slice
  // over hundreds of hosts, past ZeroMQ's default of 1023.
  zmq::context_t context{1, 8192};
  std::unique_ptr<net::Requester> rm;
  std::map<std::string, std::unique_ptr<net::Requester>> peers;  // schedulers and stores
  std::map<uint64_t, proto::SliceInfo> slices;                   // this client's, by id
  // The functions registered on each slice, to move with it when the RM remaps it.
  std::map<uint64_t, std::vector<std::weak_ptr<const Function::Impl>>> functions;
  // Object stores and schedulers used: they track this client's liveness and hear Goodbye.
  std::set<std::string> watchers;
  // Streamed submissions not acknowledged yet: scheduler -> request id -> run.
  std::map<std::string, std::map<uint64_t, uint64_t>> unacked;
  std::map<uint64_t, size_t> acks_missing;  // by run
  std::map<uint64_t, Status> refused;       // runs a scheduler refused, with why
  // The runs each run reads, until its schedulers said RunDone.
  ReadsLedger reads;

  // Reads whatever schedulers sent: answers to submissions, waiting at most `timeout` in
  // total for those still missing, and RunDone notices that have arrived (never waited
  // for: they free memory, nobody blocks on them).
  void DrainAcks(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (auto& [endpoint, pending] : unacked) {
      while (!pending.empty() || reads.Awaits(endpoint)) {
        const auto left = pending.empty()
                              ? std::chrono::milliseconds(0)
                              : std::max(std::chrono::milliseconds(0),
                                         std::chrono::duration_cast<std::chrono::milliseconds>(
                                             deadline - std::chrono::steady_clock::now()));
        auto frames = net::RecvFrames(peers.at(endpoint)->socket(), left);
        if (!frames.ok() || !frames->has_value()) break;
        auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/false);
        if (!in.ok()) continue;
        if (in->header.request_id() == 0 && in->header.kind() == proto::Kind::kRunDone) {
          if (auto done = in->header.As<proto::RunDone>(); done.ok()) {
            reads.Done(endpoint, done->run_id);  // what it returns is dropped here
          }
          continue;
        }
        auto it = pending.find(in->header.request_id());
        if (it == pending.end()) continue;
        const uint64_t run = it->second;
        pending.erase(it);
        if (in->header.kind() == proto::Kind::kError) {
          auto error = in->header.As<proto::Error>();
          refused[run] =
              (error.ok() ? proto::FromError(*error) : error.status())
                  .WithContext("scheduler " + endpoint + " refused run " + std::to_string(run));
          reads.Done(endpoint, run);  // it will not run there: no RunDone comes
        }
        if (--acks_missing[run] == 0) acks_missing.erase(run);
      }
    }
  }
  // A service the RM declared lost (ServiceChanged).
  struct Loss {
    uint8_t role = 0;  // proto::Heartbeat::Role
    std::string name;
    std::string endpoint;
    std::string reason;
  };
  // Every loss announced so far, in order: a run fails for those after its submission.
  std::vector<Loss> losses;
  // The services lost now, until they are back, by (role, name): runs that need one are
  // refused at submission.
  std::map<std::pair<uint8_t, std::string>, Loss> down;
  // How often a wait looks for the RM's notices: a quarter of a heartbeat period, so that a
  // loss fails the runs that need the service well within a period of its declaration.
  std::chrono::milliseconds notice_period{25};

  std::unique_ptr<HeartbeatThread> heartbeat;
  uint64_t id = 0;
  uint64_t next_run = 1;
  uint64_t next_object = 1;

  // The requester for a scheduler or object store, connected on first use. Watched, so that
  // a call to a peer that refuses this client's key, or that is down, says so.
  Result<net::Requester*> Peer(const std::string& endpoint) {
    auto it = peers.find(endpoint);
    if (it == peers.end()) {
      auto r = std::make_unique<net::Requester>(context, endpoint);
      ATOLL_RETURN_IF_ERROR(r->Connect(/*watch_handshakes=*/true));
      it = peers.emplace(endpoint, std::move(r)).first;
    }
    return it->second.get();
  }
  // The same for a service that tracks this client's liveness.
  Result<net::Requester*> Watcher(const std::string& endpoint) {
    if (watchers.insert(endpoint).second) heartbeat->AddWatcher(endpoint);
    return Peer(endpoint);
  }
  // Applies what the RM sent on its own since the last call: services lost or back, and
  // slices remapped off lost devices. Costs no round trip.
  void ApplyNotices() {
    for (auto& notice : rm->TakeNotices()) {
      if (notice.header.kind() == proto::Kind::kServiceChanged) {
        auto changed = notice.header.As<proto::ServiceChanged>();
        if (!changed.ok()) continue;
        const auto key = std::make_pair(changed->role, changed->name);
        if (changed->lost) {
          // What runs there read may go: their gangs there will never report.
          if (changed->role == proto::Heartbeat::kScheduler) (void)reads.Lost(changed->endpoint);
          Loss loss{changed->role, changed->name, changed->endpoint, changed->reason};
          losses.push_back(loss);
          down[key] = std::move(loss);
        } else {
          down.erase(key);
        }
        continue;
      }
      if (notice.header.kind() != proto::Kind::kSliceRemapped) continue;
      auto remapped = notice.header.As<proto::SliceRemapped>();
      if (!remapped.ok() || !slices.count(remapped->slice.slice_id)) continue;
      const proto::SliceInfo& info = remapped->slice;
      slices[info.slice_id] = info;
      auto& fns = functions[info.slice_id];
      std::erase_if(fns, [](const auto& f) { return f.expired(); });
      for (const auto& f : fns) f.lock()->slice = info;
    }
  }
  // The first loss announced since `run` was submitted of a service it needs; null if none.
  const Loss* LossFor(const RunState& run) const {
    for (size_t i = run.losses_seen; i < losses.size(); ++i) {
      if (Needs(run, losses[i])) return &losses[i];
    }
    return nullptr;
  }
  // Unavailable naming a service `run` needs that is lost now; OK when all are up.
  Status CheckUp(const RunState& run) const {
    for (const auto& [key, loss] : down) {
      if (Needs(run, loss)) return Unavailable(fmt::format("run {}: {}", run.id, loss.reason));
    }
    return Status::Ok();
  }
  static bool Needs(const RunState& run, const Loss& loss) {
    switch (loss.role) {
      case proto::Heartbeat::kScheduler:
        return run.needs_schedulers.count(loss.endpoint) > 0;
      case proto::Heartbeat::kStore:
        return run.needs_stores.count(loss.endpoint) > 0;
      case proto::Heartbeat::kExecutor:
        return run.needs_hosts.count(loss.name) > 0;
      default:
        return false;
    }
  }

  // Ids the client makes itself: unique per client, no round trip.
  uint64_t NextObjectId() { return proto::MakeObjectId(id, next_object++); }
  uint64_t NextRunId() { return proto::MakeRunId(id, next_run++); }
};

void RunState::ReleaseObjects() {
  for (const auto& owned : objects) {
    auto peer = client->Peer(owned.store);
    if (peer.ok()) {
      (void)(*peer)->Post(proto::ReleaseObject{owned.object_id, client->id, owned.shards});
    }
  }
  objects.clear();
}

RunState::~RunState() {
  ReleaseObjects();
  client->refused.erase(id);
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
  ATOLL_ASSIGN_OR_RETURN(auto hello,
                         impl->rm->Call<proto::HelloClientReply>(proto::HelloClient{options.name},
                                                                 options.request_timeout));
  impl->id = hello.client_id;
  impl->notice_period =
      std::max(std::chrono::milliseconds(1), std::chrono::milliseconds(hello.heartbeat_ms) / 4);
  impl->heartbeat = std::make_unique<HeartbeatThread>(
      impl->context, impl->id, options.rm_endpoint, std::chrono::milliseconds(hello.heartbeat_ms));
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Result<Slice> Client::CreateSlice(uint32_t num_devices, const std::string& island) {
  return CreateMeshSlice({num_devices}, island);
}

Result<Slice> Client::CreateMeshSlice(const Shape& mesh, const std::string& island) {
  int64_t num_devices = 1;
  for (int64_t extent : mesh) {
    if (extent <= 0 || extent > std::numeric_limits<uint32_t>::max() / num_devices) {
      return InvalidArgument("a slice's mesh needs positive axes, got " + ShapeString(mesh));
    }
    num_devices *= extent;
  }
  ATOLL_ASSIGN_OR_RETURN(
      auto info, impl_->rm->Call<proto::SliceInfo>(
                     proto::CreateSlice{impl_->id, static_cast<uint32_t>(num_devices), island, ""},
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
  // Results that are argument values are answered from the client's own copy.
  std::vector<Tensor> values;
  for (const auto& a : args) values.push_back(a.value() ? *a.value() : Tensor());
  run->arg_values = std::move(values);
  run->objects = OwnedObjects(lowered);
  for (const auto& r : lowered.results) {
    if (r.borrowed_arg >= 0) run->borrowed.push_back(args[r.borrowed_arg].future()->run_);
  }
  run->results = std::move(lowered.results);
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
  for (const auto& put : lowered.puts) {
    ATOLL_ASSIGN_OR_RETURN(net::Requester * store, impl_->Watcher(put.store));
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
  // Streamed: the scheduler's answer is read later (DrainAcks), so back-to-back calls cost
  // no round trip each.
  for (const auto& [endpoint, submit] : lowered.per_scheduler) {
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
      return scheduler->Post(proto::CancelRun{client.id, run.id});
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

namespace {

using Deadline = std::chrono::steady_clock::time_point;

// What is left of `deadline`, at least 1 ms so that a late call still asks once.
std::chrono::milliseconds Left(Deadline deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now()));
}

Status LossError(const Client::Impl::Loss& loss) { return Unavailable(loss.reason); }

// Waits for the schedulers' answers to `run`'s submission: a refused submission must come
// back as its own error, not as a timeout, and so must the loss of a scheduler.
Status AwaitAcceptance(const RunState& run, Deadline deadline, std::chrono::milliseconds timeout) {
  Client::Impl& client = *run.client;
  // The first look does not wait: a loss known already fails the run at once.
  std::chrono::milliseconds wait(0);
  while (client.acks_missing.count(run.id) && std::chrono::steady_clock::now() < deadline) {
    client.DrainAcks(std::min(Left(deadline), wait));
    wait = client.notice_period;
    client.ApplyNotices();
    if (!client.acks_missing.count(run.id)) break;
    if (const auto* loss = client.LossFor(run)) {
      return LossError(*loss).WithContext(fmt::format("run {}", run.id));
    }
  }
  if (auto it = client.refused.find(run.id); it != client.refused.end()) return it->second;
  if (client.acks_missing.count(run.id)) {
    return DeadlineExceeded(fmt::format("run {}: no scheduler answered its submission within {} ms",
                                        run.id, timeout.count()));
  }
  return Status::Ok();
}

// The reply to `request` from `store`, waiting until `deadline`, or the loss of a service
// `run` needs, whichever comes first.
Result<proto::Incoming> AwaitStoreReply(const RunState& run, net::Requester& store,
                                        uint64_t request, Deadline deadline) {
  Client::Impl& client = *run.client;
  while (std::chrono::steady_clock::now() < deadline) {
    auto frames = net::RecvFrames(store.socket(), std::min(Left(deadline), client.notice_period));
    if (!frames.ok()) return frames.status();
    if (frames->has_value()) {
      auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/false);
      if (in.ok() && in->header.request_id() == request) return in;
      continue;  // a late reply to an abandoned request
    }
    client.ApplyNotices();
    if (const auto* loss = client.LossFor(run)) return LossError(*loss);
  }
  return DeadlineExceeded(fmt::format("no reply from the object store at {}", store.endpoint()));
}

// Shard `s` of a result of `run`: a Get that waits for it to be sealed. When a service the
// run needs is lost meanwhile, a shard already sealed still counts; one that is not fails
// naming the lost service.
Result<Tensor> FetchShard(const RunState& run, const ResultShard& s, Deadline deadline) {
  Client::Impl& client = *run.client;
  ATOLL_ASSIGN_OR_RETURN(net::Requester * store, client.Watcher(s.store));
  // A loss known already: no waiting Get, only the final look below.
  client.ApplyNotices();
  Result<proto::Incoming> in = Unavailable("a service the run needs is lost");
  if (client.LossFor(run) == nullptr) {
    const auto wait_ms = static_cast<uint32_t>(Left(deadline).count());
    ATOLL_ASSIGN_OR_RETURN(uint64_t waiting,
                           store->Send(proto::GetObject{s.object_id, s.shard, wait_ms, true}));
    in = AwaitStoreReply(run, *store, waiting, deadline + client.options.request_timeout);
  }
  if (!in.ok()) {
    const auto* loss = client.LossFor(run);
    if (loss == nullptr || (loss->role == proto::Heartbeat::kStore && loss->endpoint == s.store)) {
      return in.status();
    }
    ATOLL_ASSIGN_OR_RETURN(uint64_t request,
                           store->Send(proto::GetObject{s.object_id, s.shard, 0, true}));
    auto sealed = AwaitStoreReply(
        run, *store, request, std::chrono::steady_clock::now() + client.options.request_timeout);
    if (!sealed.ok() || sealed->header.kind() == proto::Kind::kError) return LossError(*loss);
    in = std::move(sealed);
  }
  if (in->header.kind() == proto::Kind::kError) {
    ATOLL_ASSIGN_OR_RETURN(proto::Error error, in->header.As<proto::Error>());
    return proto::FromError(error);
  }
  ATOLL_ASSIGN_OR_RETURN(auto reply, in->header.As<proto::GetObjectReply>());
  if (in->data.size() != 1) return Internal("the reply carries no data frame");
  std::vector<std::byte> bytes(in->data[0].size());
  if (!bytes.empty()) std::memcpy(bytes.data(), in->data[0].data(), bytes.size());
  return Tensor::FromBytes(reply.dtype, reply.shape, std::move(bytes));
}

// Result `r` of `run`, read from its object stores and assembled from its shards.
Result<Tensor> FetchResult(const RunState& run, size_t r, Deadline deadline) {
  const ResultPlan& plan = run.results[r];
  if (plan.arg_index >= 0) return run.arg_values[plan.arg_index];
  std::vector<Tensor> shards;
  for (const auto& s : plan.shards) {
    auto shard = FetchShard(run, s, deadline);
    if (!shard.ok()) {
      return shard.status().WithContext(
          fmt::format("run {} result {} shard {}", run.id, r, s.shard));
    }
    shards.push_back(std::move(shard).value());
  }
  return Assemble(shards, plan.type, plan.mesh);
}

Status CancelledRun(const RunState& run) {
  return Cancelled(fmt::format("run {} was cancelled", run.id));
}

}  // namespace

Result<std::vector<Tensor>> Run::Wait(std::chrono::milliseconds timeout) {
  if (state_->cancelled) return CancelledRun(*state_);
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  ATOLL_RETURN_IF_ERROR(AwaitAcceptance(*state_, deadline, timeout));
  std::vector<Tensor> out;
  for (size_t r = 0; r < state_->results.size(); ++r) {
    ATOLL_ASSIGN_OR_RETURN(Tensor t, FetchResult(*state_, r, deadline));
    out.push_back(std::move(t));
  }
  state_->client->DrainAcks(std::chrono::milliseconds(0));  // RunDone notices that came
  return out;
}

Result<Tensor> Run::Wait(size_t index, std::chrono::milliseconds timeout) {
  if (index >= state_->results.size()) {
    return InvalidArgument(fmt::format("run {} has {} results, not a result {}", state_->id,
                                       state_->results.size(), index));
  }
  if (state_->cancelled) return CancelledRun(*state_);
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  ATOLL_RETURN_IF_ERROR(AwaitAcceptance(*state_, deadline, timeout));
  Result<Tensor> out = FetchResult(*state_, index, deadline);
  state_->client->DrainAcks(std::chrono::milliseconds(0));  // RunDone notices that came
  return out;
}

}  // namespace atl
