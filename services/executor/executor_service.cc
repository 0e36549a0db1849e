#include "services/executor/executor_service.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/base/tensor_block.h"
#include "common/net/request_server.h"
#include "common/net/sent_counters.h"
#include "compute/backend_sim.h"

namespace atl::executor {

namespace {

// How long an executor waits for an argument to appear in its object store.
constexpr uint32_t kArgumentWaitMs = 30000;
// How long a shard waits in a collective for the rest of its gang.
constexpr auto kCollectiveTimeout = std::chrono::seconds(30);

}  // namespace

ExecutorService::ExecutorService(zmq::context_t& context, ClusterConfig config, std::string host,
                                 std::string store_endpoint)
    : context_(context),
      config_(std::move(config)),
      host_(std::move(host)),
      control_(net::MakeSocket(context, zmq::socket_type::router)),
      data_(net::MakeSocket(context, zmq::socket_type::router)),
      rm_(context, config_.rm_endpoint),
      store_(context, std::move(store_endpoint)),
      outbox_(context, config_.dataplane) {}

ExecutorService::~ExecutorService() {
  devices_.clear();  // joins the stream threads before the rest goes away
  if (wake_fd_ >= 0) close(wake_fd_);
}

Status ExecutorService::Start(std::chrono::milliseconds timeout) {
  ATOLL_ASSIGN_OR_RETURN(HostLocation where, FindHost(config_, host_));
  island_ = where.island->name;
  num_devices_ = where.host->devices;
  device_memory_bytes_ = where.host->device_memory_bytes;

  const std::string any_port = "tcp://" + config_.bind_host + ":*";
  ATOLL_ASSIGN_OR_RETURN(control_endpoint_, net::Bind(control_, any_port));
  ATOLL_ASSIGN_OR_RETURN(data_endpoint_, net::Bind(data_, any_port));
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return Internal(std::string("eventfd: ") + std::strerror(errno));
  ATOLL_RETURN_IF_ERROR(outbox_.Start());
  events_ = std::make_unique<EventPublisher>(context_, "executor/" + host_);
  ATOLL_RETURN_IF_ERROR(events_->Connect(config_.events_in_endpoint));

  // The object store's arena: outputs are written and arguments read through it.
  ATOLL_RETURN_IF_ERROR(store_.Connect());
  ATOLL_ASSIGN_OR_RETURN(auto hello,
                         store_.Call<proto::StoreHelloReply>(proto::StoreHello{}, timeout));
  ATOLL_ASSIGN_OR_RETURN(ShmRegion arena, ShmRegion::Open(hello.arena_name));
  arena_ = std::make_unique<ShmRegion>(std::move(arena));

  hub_ = std::make_unique<CollectiveHub>(
      data_endpoint_,
      [this](const std::string& endpoint, const CollectiveKey& key, uint32_t from_host,
             const Tensor& partial) {
        proto::TupleHeader h;
        h.kind = proto::TupleHeader::kCollective;
        h.run_id = key.run;
        h.node = key.node;
        h.input = key.op;
        h.shard = from_host;
        {
          std::lock_guard lock(completions_mu_);
          outgoing_.push_back({endpoint, std::move(h), partial});
        }
        Wake();
      },
      kCollectiveTimeout);
  ATOLL_ASSIGN_OR_RETURN(compute::Backend * backend, compute::BackendForKind(where.host->kind));
  for (uint32_t i = 0; i < num_devices_; ++i) {
    devices_.push_back(std::make_unique<DeviceStream>(*backend, *hub_, [this](Completion c) {
      // Consumers on this host get their inputs straight from the device thread: a chain
      // of shards on one host never waits for the loop thread.
      DeliverLocalTuples(c);
      {
        std::lock_guard lock(completions_mu_);
        completions_.push_back(std::move(c));
      }
      Wake();
    }));
  }

  ATOLL_RETURN_IF_ERROR(rm_.Connect());
  proto::RegisterExecutor reg{host_,          island_,           control_endpoint_,
                              data_endpoint_, store_.endpoint(), {}};
  for (uint32_t i = 0; i < num_devices_; ++i) reg.devices.push_back({"cpu", device_memory_bytes_});
  ATOLL_ASSIGN_OR_RETURN(auto registered, rm_.Call<proto::RegisterExecutorReply>(reg, timeout));
  spdlog::info("registered {} devices (ids {}) on island {}", num_devices_,
               fmt::join(registered.device_ids, ","), island_);
  if (registered.device_ids.size() != num_devices_) {
    return Internal(fmt::format("the RM gave {} device ids for {} devices",
                                registered.device_ids.size(), num_devices_));
  }
  device_ids_ = registered.device_ids;
  return Status::Ok();
}

void ExecutorService::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof(one));
}

void ExecutorService::Run() {
  loop_.AddSocket("dispatch", control_, [this] { OnControl(); });
  loop_.AddSocket("tuples", data_, [this] { OnData(); });
  loop_.AddSocket("rm", rm_.socket(), [this] { OnRm(); });
  loop_.AddSocket("store", store_.socket(), [this] { OnStore(); });
  loop_.AddFd("completions", wake_fd_, [this] { OnCompletions(); });
  loop_.AddFd("batch window", outbox_.timer_fd(), [this] { FlushTuples(); });
  loop_.AddTimer("heartbeat", std::chrono::milliseconds(config_.heartbeat_ms),
                 [this] { Heartbeat(); });
  loop_.Run();
}

void ExecutorService::Heartbeat() {
  Status sent = rm_.Post(proto::Heartbeat{proto::Heartbeat::kExecutor, host_});
  if (!sent.ok()) spdlog::warn("heartbeat: {}", sent.ToString());
  // Per-device load for live views: busy time is cumulative, so a viewer takes the
  // difference between two reports over the difference of their ts_us.
  for (size_t d = 0; d < devices_.size(); ++d) {
    events_->Publish("device.stats", {{"device", uint64_t{device_ids_[d]}},
                                      {"host", host_},
                                      {"island", island_},
                                      {"queued", uint64_t{devices_[d]->queued()}},
                                      {"busy_us", devices_[d]->busy_us()}});
  }
  const TupleOutbox::Stats& out = outbox_.stats();
  events_->Publish("dataplane.stats", {{"host", host_},
                                       {"tuples_out", out.tuples},
                                       {"batches_out", out.batches},
                                       {"bytes_out", out.bytes},
                                       {"tuples_in", received_.tuples},
                                       {"batches_in", received_.batches},
                                       {"bytes_in", received_.bytes},
                                       {"last_in_us", received_.last_us}});
  events_->Publish("net.stats", net::SentCountFields());
}

// ---------------------------------------------------------------------------------------
// Control plane.

void ExecutorService::OnControl() {
  net::ServeRequests(control_, *events_, "error.executor", [this](proto::Incoming& in) {
    if (in.header.kind() == proto::Kind::kRunLoop) return OnRunLoop(in);
    if (in.header.kind() != proto::Kind::kDispatch) {
      return InvalidArgument(
          fmt::format("the executor's control socket does not handle {} "
                      "messages",
                      proto::KindName(in.header.kind())));
    }
    ATOLL_ASSIGN_OR_RETURN(proto::Dispatch dispatch, in.header.As<proto::Dispatch>());
    OnDispatch(std::move(dispatch), in.routing_id ? in.routing_id->to_string() : "");
    return Status::Ok();
  });
}

void ExecutorService::OnDispatch(proto::Dispatch dispatch, const std::string& scheduler) {
  if (dispatch.entries.empty()) return;
  const uint64_t run = dispatch.entries.front().run_id;
  const uint64_t first_gang = dispatch.entries.front().gang_seq;
  const uint64_t last_gang = dispatch.entries.back().gang_seq;
  const auto entries = static_cast<uint64_t>(dispatch.entries.size());
  // Every local shard of a gang is counted before any is admitted (an entry can fail
  // while admitted), so that the gang is reported once, when all of them finished.
  if (!scheduler.empty()) {
    for (const auto& entry : dispatch.entries) gang_reports_.Expect(scheduler, entry.gang_seq);
  }
  for (auto& entry : dispatch.entries) Admit(std::move(entry), scheduler);
  // The host-side work for every entry is done: buffers reserved, inputs resolved, shards
  // queued in gang order, before any of them ran.
  events_->Publish("dispatch.admitted", {{"run", run},
                                         {"host", host_},
                                         {"entries", entries},
                                         {"first_gang", first_gang},
                                         {"last_gang", last_gang}});
  FlushTuples();
}

Status ExecutorService::OnRunLoop(proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(proto::RunLoop loop, in.header.As<proto::RunLoop>());
  if (loop.steps == 0 || loop.shards.size() != loop.devices.size() || in.data.size() != 1) {
    return InvalidArgument("RunLoop needs steps > 0, a device per shard and one data frame");
  }
  auto fn = functions_.find(loop.function_id);
  if (fn == functions_.end()) {
    return NotFound(
        fmt::format("function {} was never compiled on host {}", loop.function_id, host_));
  }
  std::vector<std::byte> bytes(in.data[0].size());
  if (!bytes.empty()) std::memcpy(bytes.data(), in.data[0].data(), bytes.size());
  ATOLL_ASSIGN_OR_RETURN(Tensor first, Tensor::FromBytes(loop.dtype, loop.shape, std::move(bytes)));
  for (size_t i = 0; i < loop.shards.size(); ++i) {
    const uint32_t shard = loop.shards[i];
    for (uint32_t step = 0; step < loop.steps; ++step) {
      proto::Entry e;
      e.run_id = loop.run_id;
      e.node = step;
      e.gang_seq = step + 1;  // this executor's own order: it runs nothing else meanwhile
      e.function_id = loop.function_id;
      e.device = loop.devices[i];
      e.shard = shard;
      e.num_shards = fn->second.num_shards;
      e.owner_client = loop.owner_client;
      e.inputs = {{proto::InputSource::kTuple, 0, 0}};
      if (step + 1 < loop.steps) {
        e.outputs = {{{proto::OutputDest::kTuple, data_endpoint_, step + 1, 0, shard, 0, {}}}};
      } else {
        e.outputs = {{{proto::OutputDest::kStore, "", 0, 0, shard, loop.result_object, {}}}};
      }
      Admit(std::move(e), /*scheduler=*/"");
    }
    DeliverInput({loop.run_id, 0, 0, shard}, first);
  }
  FlushTuples();
  return Status::Ok();
}

// The host-side work for one shard, done before its inputs exist.
void ExecutorService::Admit(proto::Entry entry, const std::string& scheduler) {
  auto item = std::make_shared<WorkItem>();
  item->entry = std::move(entry);
  item->scheduler = scheduler;
  const proto::Entry& e = item->entry;
  item->inputs.resize(e.inputs.size());
  item->inputs_missing = e.inputs.size();

  if (e.device >= devices_.size()) {
    // No stream to queue it on: fail its consumers directly.
    Completion done{
        item, InvalidArgument(fmt::format("device {} does not exist on host {}", e.device, host_)),
        NowMicros(), NowMicros()};
    SendOutputs(done);
    return;
  }
  DeviceStream& device = *devices_[e.device];
  auto fn = functions_.find(e.function_id);
  if (fn == functions_.end()) {
    item->failure =
        NotFound(fmt::format("function {} was never compiled on host {}", e.function_id, host_));
  } else if (fn->second.num_shards != e.num_shards) {
    item->failure =
        InvalidArgument(fmt::format("function {} was compiled for {} shards, not {}", e.function_id,
                                    fn->second.num_shards, e.num_shards));
  } else if (fn->second.def->inputs.size() != e.inputs.size() ||
             fn->second.def->outputs.size() != e.outputs.size()) {
    item->failure =
        InvalidArgument(fmt::format("entry for function {} has {} inputs and {} "
                                    "outputs; the function has {} and {}",
                                    e.function_id, e.inputs.size(), e.outputs.size(),
                                    fn->second.def->inputs.size(), fn->second.def->outputs.size()));
  } else if (ir::HasCollectives(*fn->second.def) &&
             fn->second.layout->shard_endpoints.size() != e.num_shards) {
    item->failure = FailedPrecondition(fmt::format(
        "function {} has collectives but was compiled without its slice's layout", e.function_id));
  } else {
    item->function = fn->second.def;
    item->layout = fn->second.layout;
  }
  for (const auto& peer : e.peers) {
    if (auto lost = lost_peers_.find(peer); lost != lost_peers_.end() && item->failure.ok()) {
      item->failure = lost->second;
    }
  }

  // Reserve object-store space for outputs that land there, ahead of the data. A failing
  // entry reserves them too, so that they can be sealed with its error.
  const auto types = item->function ? ir::OutputTypes(*item->function)
                                    : std::vector<ir::TensorType>(e.outputs.size());
  const Shape mesh = item->function ? ir::MeshOf(*item->function, static_cast<int>(e.num_shards))
                                    : Shape{e.num_shards};
  for (size_t o = 0; o < e.outputs.size(); ++o) {
    for (const auto& dest : e.outputs[o]) {
      if (dest.kind != proto::OutputDest::kStore) continue;
      auto write = std::make_shared<StoreWrite>();
      write->create = {dest.object_id, dest.shard, e.owner_client, types[o].dtype,
                       ir::ShardShape(types[o], mesh)};
      // The output is device-resident: it takes the memory of the device it runs on.
      write->create.device = static_cast<int32_t>(e.device);
      store_writes_[{dest.object_id, dest.shard}] = write;
      if (!ir::IsStatic(types[o])) {
        write->deferred = true;
        continue;
      }
      Status sent = ReserveStoreWrite(write);
      if (!sent.ok() && item->failure.ok()) {
        item->failure = sent.WithContext("reserve output in the object store");
      }
      if (sent.ok()) {
        write->waiting = item;
        item->reservations_missing++;
      }
    }
  }

  device.Enqueue(item);
  if (!item->failure.ok()) {
    device.Fail(item, item->failure);
    return;
  }
  for (uint32_t i = 0; i < e.inputs.size(); ++i) {
    const auto& src = e.inputs[i];
    const InputKey key{e.run_id, e.node, i, e.shard};
    if (src.kind == proto::InputSource::kStore) {
      if (auto w = store_writes_.find({src.object_id, src.shard}); w != store_writes_.end()) {
        w->second->local_readers.emplace_back(item, i);  // written here, not sealed yet
        continue;
      }
      Status sent = SendStore({StoreRequest::kGetInput, nullptr, item, i},
                              proto::GetObject{src.object_id, src.shard, kArgumentWaitMs, false});
      if (!sent.ok()) device.Fail(item, sent.WithContext("read argument"));
      continue;
    }
    std::optional<Result<Tensor>> early;
    {
      std::lock_guard lock(mailbox_mu_);
      if (auto it = early_.find(key); it != early_.end()) {
        early = std::move(it->second);
        early_.erase(it);
      } else {
        waiting_[key] = item;
      }
    }
    if (early && early->ok()) device.Deliver(item, i, std::move(*early).value());
    if (early && !early->ok()) device.Fail(item, early->status());
  }
}

void ExecutorService::OnRm() {
  for (int i = 0; i < 64; ++i) {
    auto frames = net::RecvFrames(rm_.socket(), std::chrono::milliseconds(0));
    if (!frames.ok() || !frames->has_value()) return;
    auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/false);
    if (!in.ok()) {
      spdlog::warn("bad message from the RM: {}", in.status().ToString());
      continue;
    }
    switch (in->header.kind()) {
      case proto::Kind::kCompile:
        OnCompile(*in);
        break;
      case proto::Kind::kHostChanged:
        OnHostChanged(*in);
        break;
      case proto::Kind::kError: {
        auto err = in->header.As<proto::Error>();
        spdlog::warn("the RM says: {}", err.ok() ? err->message : err.status().ToString());
        break;
      }
      default:
        break;  // late replies to setup calls
    }
  }
}

void ExecutorService::OnCompile(const proto::Incoming& in) {
  auto compile = in.header.As<proto::Compile>();
  Status status =
      compile.ok() ? ir::Validate(compile->function, compile->num_shards) : compile.status();
  if (status.ok() && compile->shard_endpoints.size() != compile->num_shards) {
    status = InvalidArgument(fmt::format("compile of function {}: {} shard endpoints for {} shards",
                                         compile->function_id, compile->shard_endpoints.size(),
                                         compile->num_shards));
  }
  if (status.ok()) {
    functions_[compile->function_id] = {
        std::make_shared<const ir::FunctionDef>(std::move(compile->function)), compile->num_shards,
        std::make_shared<const GangLayout>(std::move(compile->shard_endpoints))};
    events_->Publish("function.compiled", {{"function", compile->function_id}, {"host", host_}});
    (void)net::Send(rm_.socket(), nullptr, in.header.request_id(), proto::Ok{});
  } else {
    (void)net::Send(rm_.socket(), nullptr, in.header.request_id(), proto::ToError(status));
  }
}

void ExecutorService::OnHostChanged(const proto::Incoming& in) {
  auto changed = in.header.As<proto::HostChanged>();
  if (!changed.ok() || changed->host == host_) return;
  if (!changed->lost) {
    lost_peers_.erase(changed->control_endpoint);
    return;
  }
  const Status lost = Unavailable(changed->reason);
  lost_peers_[changed->control_endpoint] = lost;
  // A shard waiting for the lost host's tuples would wait for ever: it fails now and passes
  // the error on to its consumers and results.
  std::vector<std::shared_ptr<WorkItem>> doomed;
  {
    std::lock_guard lock(mailbox_mu_);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      const auto& peers = it->second->entry.peers;
      if (std::find(peers.begin(), peers.end(), changed->control_endpoint) == peers.end()) {
        ++it;
        continue;
      }
      doomed.push_back(std::move(it->second));
      it = waiting_.erase(it);
    }
  }
  for (const auto& item : doomed) devices_[item->entry.device]->Fail(item, lost);
}

// ---------------------------------------------------------------------------------------
// Data plane.

void ExecutorService::OnData() {
  net::ServeRequests(data_, *events_, "error.executor", [this](proto::Incoming& in) {
    if (in.header.kind() != proto::Kind::kTupleBatch) {
      return InvalidArgument("the data plane takes only TupleBatch messages");
    }
    return OnTupleBatch(in);
  });
  FlushTuples();
}

Status ExecutorService::OnTupleBatch(proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(proto::TupleBatch batch, in.header.As<proto::TupleBatch>());
  uint64_t bytes = 0;
  for (const auto& frame : in.data) bytes += frame.size();
  ATOLL_ASSIGN_OR_RETURN(std::vector<Result<Tensor>> values, TupleValues(batch, in.data));
  received_.tuples += batch.tuples.size();
  received_.batches++;
  received_.bytes += bytes;
  received_.last_us = NowMicros();
  for (size_t i = 0; i < batch.tuples.size(); ++i) {
    const auto& h = batch.tuples[i];
    if (h.kind == proto::TupleHeader::kCollective) {
      hub_->Deposit({h.run_id, h.node, h.input}, h.shard, std::move(values[i]));
    } else {
      ReceiveTuple(h, std::move(values[i]));
    }
  }
  return Status::Ok();
}

void ExecutorService::DeliverInput(const InputKey& key, Result<Tensor> value) {
  std::shared_ptr<WorkItem> item;
  {
    std::lock_guard lock(mailbox_mu_);
    auto it = waiting_.find(key);
    if (it == waiting_.end()) {
      // The producer was faster than our Dispatch: keep the tuple until the entry arrives.
      early_.insert_or_assign(key, std::move(value));
      return;
    }
    item = std::move(it->second);
    waiting_.erase(it);
  }
  DeviceStream& device = *devices_[item->entry.device];
  if (value.ok()) {
    device.Deliver(item, key.input, std::move(value).value());
  } else {
    device.Fail(item, value.status());
  }
}

void ExecutorService::DeliverLocalTuples(Completion& done) {
  const proto::Entry& e = done.item->entry;
  for (size_t o = 0; o < e.outputs.size(); ++o) {
    for (const auto& dest : e.outputs[o]) {
      // Pieces of a reshard are cut and put together by the loop thread.
      if (dest.kind != proto::OutputDest::kTuple || dest.data_endpoint != data_endpoint_ ||
          dest.piece.of > 0) {
        continue;
      }
      DeliverInput({e.run_id, dest.node, dest.input, dest.shard},
                   done.outputs.ok() ? Result<Tensor>((*done.outputs)[o])
                                     : Result<Tensor>(done.outputs.status()));
    }
  }
  done.local_tuples_delivered = true;
}

void ExecutorService::OnCompletions() {
  uint64_t count = 0;
  [[maybe_unused]] auto n = read(wake_fd_, &count, sizeof(count));
  std::vector<Completion> done;
  std::vector<OutgoingTuple> outgoing;
  {
    std::lock_guard lock(completions_mu_);
    done.swap(completions_);
    outgoing.swap(outgoing_);
  }
  for (auto& t : outgoing) QueueTuple(t.endpoint, std::move(t.header), std::move(t.value));
  for (auto& c : done) SendOutputs(c);
  FlushTuples();
}

void ExecutorService::SendOutputs(Completion& done) {
  const proto::Entry& e = done.item->entry;
  if (!done.item->scheduler.empty()) {
    gang_reports_.ShardDone(done.item->scheduler, e.gang_seq,
                            static_cast<uint64_t>(done.end_us - done.start_us),
                            done.outputs.status().code());
  }
  if (done.outputs.ok()) {
    events_->Publish("gang.done", {{"run", e.run_id},
                                   {"node", uint64_t{e.node}},
                                   {"gang", e.gang_seq},
                                   {"shard", uint64_t{e.shard}},
                                   {"device", uint64_t{device_ids_[e.device]}},
                                   {"host", host_},
                                   {"client", e.owner_client},
                                   {"start_us", done.start_us},
                                   {"end_us", done.end_us}});
  } else {
    events_->Publish("error.gang", {{"run", e.run_id},
                                    {"node", uint64_t{e.node}},
                                    {"shard", uint64_t{e.shard}},
                                    {"host", host_},
                                    {"error", done.outputs.status().ToString()}});
  }
  for (size_t o = 0; o < e.outputs.size(); ++o) {
    // Copied only when a store write or a remote tuple needs it: a chain on this host was
    // fed by the device thread already and needs no copy here.
    std::optional<Result<Tensor>> copy;
    auto value = [&]() -> const Result<Tensor>& {
      if (!copy) {
        copy.emplace(done.outputs.ok() ? Result<Tensor>((*done.outputs)[o])
                                       : Result<Tensor>(done.outputs.status()));
      }
      return *copy;
    };
    for (const auto& dest : e.outputs[o]) {
      if (dest.kind == proto::OutputDest::kStore) {
        auto it = store_writes_.find({dest.object_id, dest.shard});
        if (it == store_writes_.end()) continue;  // reservation failed; reported then
        std::shared_ptr<StoreWrite> write = it->second;
        if (value().ok()) {
          write->value = *value();
        } else {
          write->failure = value().status();
        }
        FeedLocalReaders(*write, write->failure);
        if (write->deferred) {
          // Now the shape is known; a failed shard's output is sealed empty with its error.
          write->deferred = false;
          if (write->value) {
            write->create.shape = write->value->shape();
          } else {
            for (int64_t& d : write->create.shape) d = std::max<int64_t>(d, 0);
          }
          Status sent = ReserveStoreWrite(write);
          if (!sent.ok()) {
            store_writes_.erase(it);
            events_->Publish("error.executor",
                             {{"error", sent.WithContext("reserve output").ToString()}});
          }
          continue;
        }
        CompleteStoreWrite(write);
        continue;
      }
      const proto::Piece& piece = dest.piece;
      if (dest.data_endpoint == data_endpoint_ && piece.of == 0 && done.local_tuples_delivered) {
        continue;
      }
      proto::TupleHeader h;
      h.run_id = e.run_id;
      h.node = dest.node;
      h.input = dest.input;
      h.shard = dest.shard;
      if (piece.of == 0) {
        QueueTuple(dest.data_endpoint, std::move(h), value());
        continue;
      }
      if (dest.route_by >= 0) {
        h.kind = proto::TupleHeader::kRows;
        h.pieces = piece.of;
        h.part = e.shard;
        QueueTuple(dest.data_endpoint, std::move(h), RoutedRows(done, o, dest));
        continue;
      }
      h.dst_begin = piece.dst_begin;
      h.dst_shape = piece.dst_shape;
      h.pieces = piece.of;
      // Without a value, `dtype` tells the consumer what its shard will be made of.
      h.dtype = value().ok() ? value()->dtype() : DType::kF32;
      QueueTuple(dest.data_endpoint, std::move(h),
                 value().ok() ? ExtractBlock(*value(), piece.begin, piece.size)
                              : Result<Tensor>(value().status()));
    }
  }
}

void ExecutorService::ReceiveTuple(const proto::TupleHeader& h, Result<Tensor> value) {
  const InputKey key{h.run_id, h.node, h.input, h.shard};
  if (h.kind == proto::TupleHeader::kRows && h.pieces == 0) {
    DeliverInput(key, InvalidArgument("routed rows that name no producer count"));
    return;
  }
  if (h.pieces == 0) {
    DeliverInput(key, std::move(value));
    return;
  }
  if (auto whole = pieces_.Add(key, h, std::move(value))) DeliverInput(key, std::move(*whole));
}

Result<Tensor> ExecutorService::RoutedRows(const Completion& done, size_t output,
                                           const proto::OutputDest& dest) {
  if (!done.outputs.ok()) return done.outputs.status();
  const auto& outputs = *done.outputs;
  if (dest.route_by < 0 || static_cast<size_t>(dest.route_by) >= outputs.size()) {
    return InvalidArgument(
        fmt::format("rows routed by output {} of {}", dest.route_by, outputs.size()));
  }
  const Tensor& destinations = outputs[dest.route_by];
  if (destinations.dtype() == DType::kI32) {
    for (int32_t d : destinations.as<int32_t>()) {
      if (d < 0 || static_cast<uint32_t>(d) >= dest.route_shards) {
        // Every consumer shard hears the error: a row routed nowhere must not vanish.
        return InvalidArgument(
            fmt::format("a row is routed to shard {}, but the consumer "
                        "has shards 0..{}",
                        d, dest.route_shards - 1));
      }
    }
  }
  return SelectRows(outputs[output], destinations, static_cast<int32_t>(dest.shard));
}

void ExecutorService::QueueTuple(const std::string& endpoint, proto::TupleHeader h,
                                 Result<Tensor> value) {
  if (endpoint == data_endpoint_ && h.kind != proto::TupleHeader::kCollective) {
    ReceiveTuple(h, std::move(value));  // same host: no socket
    return;
  }
  // A collective partial holds up its whole gang: it never waits for the window.
  const bool urgent = h.kind == proto::TupleHeader::kCollective;
  outbox_.Add(endpoint, std::move(h), std::move(value), urgent);
}

void ExecutorService::FlushTuples() {
  for (const auto& [scheduler, done] : gang_reports_.TakeReady()) {
    zmq::message_t routing(scheduler.data(), scheduler.size());
    Status sent = net::Send(control_, &routing, 0, done);
    if (!sent.ok()) {
      events_->Publish("error.executor",
                       {{"error", sent.WithContext("report finished gangs").ToString()}});
    }
  }
  for (const Status& error : outbox_.Flush()) {
    events_->Publish("error.executor", {{"error", error.ToString()}});
  }
}

// ---------------------------------------------------------------------------------------
// Object store.

Status ExecutorService::SendStore(StoreRequest request, const auto& body) {
  const uint64_t id = next_store_request_++;
  ATOLL_RETURN_IF_ERROR(net::Send(store_.socket(), nullptr, id, body));
  store_requests_.emplace(id, std::move(request));
  return Status::Ok();
}

void ExecutorService::OnStore() {
  for (int i = 0; i < 64; ++i) {
    auto frames = net::RecvFrames(store_.socket(), std::chrono::milliseconds(0));
    if (!frames.ok() || !frames->has_value()) break;
    auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/false);
    if (!in.ok()) {
      spdlog::warn("bad reply from the object store: {}", in.status().ToString());
      continue;
    }
    auto it = store_requests_.find(in->header.request_id());
    if (it == store_requests_.end()) continue;
    StoreRequest req = it->second;
    Status error;
    if (in->header.kind() == proto::Kind::kError) {
      auto err = in->header.As<proto::Error>();
      error = err.ok() ? proto::FromError(*err) : err.status();
    }
    switch (req.kind) {
      case StoreRequest::kCreate: {
        store_requests_.erase(it);
        auto reply = in->header.As<proto::CreateObjectReply>();
        if (error.ok() && !reply.ok()) error = reply.status();
        if (req.write->waiting) {
          DeviceStream& device = *devices_[req.write->waiting->entry.device];
          if (error.ok()) {
            device.Reserved(req.write->waiting);
          } else {
            device.Fail(req.write->waiting, error.WithContext("reserve output"));
          }
          req.write->waiting.reset();
        }
        if (!error.ok()) {
          // Nothing to seal: the object store refused the space (one that can never fit is
          // recorded there as failed, so that its readers get the error).
          FeedLocalReaders(*req.write, error.WithContext("reserve output"));
          store_writes_.erase({req.write->create.object_id, req.write->create.shard});
          events_->Publish("error.executor",
                           {{"error", error.WithContext("reserve output").ToString()}});
          break;
        }
        req.write->offset = reply->offset;
        CompleteStoreWrite(req.write);
        break;
      }
      case StoreRequest::kGetInput: {
        store_requests_.erase(it);
        Result<Tensor> value = error;
        if (error.ok()) {
          auto reply = in->header.As<proto::GetObjectReply>();
          value = reply.ok() ? ReadArena(*reply) : Result<Tensor>(reply.status());
        }
        DeviceStream& device = *devices_[req.item->entry.device];
        if (value.ok())
          device.Deliver(req.item, req.input, std::move(value).value());
        else
          device.Fail(req.item, value.status().WithContext("read argument"));
        break;
      }
      case StoreRequest::kSeal:
        store_requests_.erase(it);
        if (!error.ok()) {
          events_->Publish("error.executor", {{"error", error.WithContext("seal").ToString()}});
        }
        break;
    }
  }
  FlushTuples();
}

Result<Tensor> ExecutorService::ReadArena(const proto::GetObjectReply& reply) {
  ATOLL_ASSIGN_OR_RETURN(auto bytes, std::as_const(*arena_).Slice(reply.offset, reply.nbytes));
  return Tensor::FromBytes(reply.dtype, reply.shape,
                           std::vector<std::byte>(bytes.begin(), bytes.end()));
}

void ExecutorService::FeedLocalReaders(StoreWrite& write, const Status& failure) {
  for (auto& [item, input] : write.local_readers) {
    DeviceStream& device = *devices_[item->entry.device];
    if (failure.ok() && write.value) {
      device.Deliver(item, input, *write.value);
    } else {
      device.Fail(item, failure.ok() ? Internal("no value") : failure);
    }
  }
  write.local_readers.clear();
}

Status ExecutorService::ReserveStoreWrite(const std::shared_ptr<StoreWrite>& write) {
  return SendStore({StoreRequest::kCreate, write, nullptr, 0}, write->create);
}

// Writes a finished output shard into its reserved arena space and seals it, once both
// the space (CreateObjectReply) and the value (the shard ran) exist.
void ExecutorService::CompleteStoreWrite(const std::shared_ptr<StoreWrite>& write) {
  if (write->finished || !write->offset) return;
  if (!write->value && write->failure.ok()) return;
  write->finished = true;
  store_writes_.erase({write->create.object_id, write->create.shard});
  proto::SealObject seal{write->create.object_id, write->create.shard, 0, ""};
  if (write->value) {
    auto span = arena_->Slice(*write->offset, write->value->nbytes());
    if (span.ok()) {
      std::memcpy(span->data(), write->value->data(), write->value->nbytes());
    } else {
      write->failure = span.status();
    }
  }
  if (!write->failure.ok()) {
    seal.error_code = static_cast<int32_t>(write->failure.code());
    seal.error = write->failure.message();
  }
  Status sent = SendStore({StoreRequest::kSeal, nullptr, nullptr, 0}, seal);
  if (!sent.ok()) events_->Publish("error.executor", {{"error", sent.ToString()}});
}

}  // namespace atl::executor
