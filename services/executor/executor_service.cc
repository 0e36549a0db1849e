#include "services/executor/executor_service.h"

#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/net/event_topics.h"
#include "common/net/request_server.h"
#include "common/net/sent_counters.h"
#include "compute/backend_sim.h"
#include "kernels/matmul_threads.h"

namespace atl::executor {

namespace {
// How long a shard waits in a collective for the rest of its gang.
constexpr auto kCollectiveTimeout = std::chrono::seconds(30);
}  // namespace

ExecutorService::ExecutorService(zmq::context_t& context, ClusterConfig config,
                                 const HostPlacement& where, std::string store_endpoint)
    : context_(context),
      config_(std::move(config)),
      host_(where.host.name),
      island_(where.island),
      device_kind_(where.host.kind),
      num_devices_(where.host.devices),
      device_memory_bytes_(where.host.device_memory_bytes),
      matmul_threads_(where.host.matmul_threads),
      wait_spin_(where.host.wait_spin_us),
      control_(net::MakeSocket(context, zmq::socket_type::router)),
      data_(net::MakeSocket(context, zmq::socket_type::router)),
      rm_(context, config_.rm_endpoint),
      store_(context, std::move(store_endpoint)),
      outbox_(context, config_.dataplane, std::chrono::milliseconds(config_.input_wait_ms)) {
  // Gang reports to a scheduler must not be lost (its window would never move on): its
  // queue here holds at most one report per gang it dispatched, so it is not bounded
  // further, and a burst of reports in one loop turn never finds it full.
  control_.set(zmq::sockopt::sndhwm, 0);
}

ExecutorService::~ExecutorService() {
  // A device thread may wait in a collective whose partner's message never comes.
  if (hub_) hub_->Stop(Cancelled("the executor is stopping"));
  devices_.Clear();  // joins the stream threads before the rest goes away
}

void ExecutorService::BindOn(std::string control_endpoint, std::string data_endpoint) {
  bind_control_ = std::move(control_endpoint);
  bind_data_ = std::move(data_endpoint);
}

Status ExecutorService::Start(std::chrono::milliseconds timeout) {
  const std::string any_port = "tcp://" + config_.bind_host + ":*";
  ATOLL_ASSIGN_OR_RETURN(
      control_endpoint_,
      BindAndAdvertise(control_, bind_control_.empty() ? any_port : bind_control_, config_,
                       net::Audience::kMembers));
  ATOLL_ASSIGN_OR_RETURN(
      data_endpoint_, BindAndAdvertise(data_, bind_data_.empty() ? any_port : bind_data_, config_,
                                       net::Audience::kMembers));
  ATOLL_RETURN_IF_ERROR(completions_.Open());
  ATOLL_RETURN_IF_ERROR(outbox_.Start());
  events_ = std::make_unique<EventPublisher>(context_, "executor/" + host_);
  ATOLL_RETURN_IF_ERROR(events_->Connect(config_.events_in_endpoint));

  // The object store's arena: outputs are written and arguments read through it.
  ATOLL_RETURN_IF_ERROR(store_.Connect());
  arena_ = std::make_unique<ShmRegion>();
  admission_ = std::make_unique<AdmissionCore>(host_, num_devices_);
  store_link_ = std::make_unique<StoreLink>(
      store_requests_, devices_, object_readers_, *arena_,
      StoreLink::Hooks{
          .on_error = [this](const Status& error) { PublishError(error); },
          .on_restarted = [this] { store_restarted_ = true; },
          .on_ahead_answered = [this](const std::shared_ptr<WorkItem>& item,
                                      const Status& answer) { OnAheadAnswered(*item, answer); }});
  ATOLL_RETURN_IF_ERROR(AttachStore(timeout));
  router_ = std::make_unique<OutputRouter>(
      data_endpoint_.advertised, mailbox_, object_readers_,
      [this](const std::string& endpoint, proto::TupleHeader h, Result<Tensor> value, bool urgent) {
        outbox_.Add(endpoint, std::move(h), std::move(value), urgent);
      },
      [this](const proto::OutputDest& dest, const Result<Tensor>& value) {
        store_link_->WriteOutput(dest.object_id, dest.shard, value);
      });
  // Threads handing work to each other spin briefly before they sleep (SpinCondition).
  hub_ = std::make_unique<CollectiveHub>(
      data_endpoint_.advertised,
      [this](const std::string& endpoint, const CollectiveKey& key, CollectiveValue what,
             uint32_t from_host, Result<Tensor> value) {
        completions_.Push(CompletionQueue::OutgoingTuple{
            endpoint, CollectiveHub::TupleOf(key, what, from_host), std::move(value)});
      },
      kCollectiveTimeout, CollectiveHub::kAllPairsMaxHosts, wait_spin_);
  ATOLL_ASSIGN_OR_RETURN(compute::Backend * backend, compute::BackendForKind(device_kind_));
  // Each device multiplies on its own share of the cores, with OpenBLAS single-threaded:
  // its threaded calls run one at a time per process (kernels/matmul_threads.h).
  const int cores = kernels::AvailableCores();
  const int matmul_threads = matmul_threads_ != 0
                                 ? static_cast<int>(matmul_threads_)
                                 : kernels::CoresPerDevice(cores, static_cast<int>(num_devices_));
  kernels::SetBlasThreads(1);
  spdlog::info("{} matmul threads per device ({} cores, {} devices)", matmul_threads, cores,
               num_devices_);
  for (uint32_t i = 0; i < num_devices_; ++i) {
    devices_.Add(std::make_unique<DeviceStream>(
        *backend, *hub_,
        [this](Completion c) {
          // Consumers on this host get their inputs straight from the device thread: a chain
          // of shards on one host never waits for the loop thread.
          router_->DeliverLocal(c);
          completions_.Push(std::move(c));
        },
        matmul_threads, wait_spin_));
  }

  ATOLL_RETURN_IF_ERROR(rm_.Connect());
  proto::RegisterExecutor reg{
      host_, island_, control_endpoint_.advertised, data_endpoint_.advertised, store_.endpoint(),
      {}};
  // Of the host's kind ("cpu", "sim"): a slice that asks for a kind gets only such devices.
  for (uint32_t i = 0; i < num_devices_; ++i) {
    reg.devices.push_back({device_kind_, device_memory_bytes_});
  }
  ATOLL_ASSIGN_OR_RETURN(auto registered, rm_.Call<proto::RegisterExecutorReply>(reg, timeout));
  spdlog::info("registered {} devices (ids {}) on island {}", num_devices_,
               fmt::join(registered.device_ids, ","), island_);
  if (registered.device_ids.size() != num_devices_) {
    return Internal(fmt::format("the RM gave {} device ids for {} devices",
                                registered.device_ids.size(), num_devices_));
  }
  device_ids_ = registered.device_ids;
  held_.Expect(registered.functions_coming,
               SteadyMicros() + int64_t{config_.compile_wait_ms} * 1000);
  return Status::Ok();
}

void ExecutorService::PublishError(const Status& error) {
  events_->Publish(topics::kErrorExecutor, {{"error", error.ToString()}});
}

void ExecutorService::Run() {
  loop_.AddSocket("dispatch", control_, [this] { OnControl(); });
  loop_.AddSocket("tuples", data_, [this] { OnData(); });
  loop_.AddSocket("rm", rm_.socket(), [this] { OnRm(); });
  loop_.AddSocket("store", store_.socket(), [this] { OnStore(); });
  loop_.AddFd("completions", completions_.fd(), [this] { OnCompletions(); });
  loop_.AddFd("unpins", store_link_->unpin_fd(), [this] { store_link_->SendUnpins(); });
  loop_.AddFd("batch window", outbox_.timer_fd(), [this] { FlushTuples(); });
  loop_.AddTimer("heartbeat", std::chrono::milliseconds(config_.heartbeat_ms),
                 [this] { Heartbeat(); });
  loop_.AddTimer("waits", std::chrono::milliseconds(config_.heartbeat_ms), [this] {
    AdmitHeld();  // those whose wait for a Compile is over
    FailLateInputs();
  });
  loop_.Run();
}

void ExecutorService::Publish(const ExecutorEvent& event, int64_t ts_us) {
  events_->Publish(event.topic, event.fields, ts_us);
}

void ExecutorService::FailLateInputs() {
  const int64_t wait_us = int64_t{config_.input_wait_ms} * 1000;
  for (const InputKey& key : mailbox_.FailWaitingLongerThan(SteadyMicros(), wait_us)) {
    Publish(InputLate(key, host_, config_.input_wait_ms));
  }
}

void ExecutorService::Heartbeat() {
  Status sent =
      rm_.Post(proto::Heartbeat{proto::Heartbeat::kExecutor, host_, 0, loop_.LongestStallMicros()});
  if (!sent.ok()) spdlog::warn("heartbeat: {}", sent.ToString());
  // A restarted store that did not answer its hello gets asked again (until the RM
  // declares it lost).
  if (store_restarted_) (void)AttachStore(std::chrono::milliseconds(config_.heartbeat_ms));
  // Per-device load for live views: busy time is cumulative, so a viewer takes the
  // difference between two reports over the difference of their ts_us.
  for (size_t d = 0; d < devices_.size(); ++d) {
    const DeviceStream& device = devices_.at(d);
    Publish(DeviceStats(device_ids_[d], host_, island_, device.queued(), device.busy_us()));
  }
  Publish(DataPlaneStats(host_, outbox_.stats(), received_, outbox_.held()));
  events_->Publish(topics::kNetStats, net::SentCountFields());
}

// ---------------------------------------------------------------------------------------
// Control plane.

void ExecutorService::OnControl() {
  net::ServeRequests(
      control_, *events_, std::string(topics::kErrorExecutor), rejected_,
      [this](proto::Incoming& in) {
        if (in.header.kind() == proto::Kind::kRunLoop) return OnRunLoop(in);
        if (in.header.kind() == proto::Kind::kCancelRun) return OnCancelRun(in);
        if (in.header.kind() != proto::Kind::kDispatch) {
          return InvalidArgument(
              fmt::format("the executor's control socket does not handle {} messages",
                          proto::KindName(in.header.kind())));
        }
        ATOLL_ASSIGN_OR_RETURN(proto::Dispatch dispatch, in.header.As<proto::Dispatch>());
        OnDispatch(std::move(dispatch), in.routing_id ? in.routing_id->to_string() : "");
        return Status::Ok();
      });
}

void ExecutorService::OnDispatch(proto::Dispatch dispatch, const std::string& scheduler) {
  if (dispatch.entries.empty()) return;
  const auto compiled = [this](uint64_t f) { return IsCompiled(f); };
  if (!held_.MustHold(dispatch, compiled, SteadyMicros())) {
    AdmitDispatch(std::move(dispatch), scheduler);
    return;
  }
  Publish(DispatchHeld(dispatch, host_, held_.size()));
  const Status given_up = held_.Add(std::move(dispatch), scheduler);
  if (!given_up.ok()) events_->Publish(topics::kErrorExecutor, {{"error", given_up.ToString()}});
}

void ExecutorService::AdmitHeld() {
  if (held_.empty()) return;
  const auto compiled = [this](uint64_t f) { return IsCompiled(f); };
  for (auto& held : held_.TakeReady(compiled, SteadyMicros())) {
    AdmitDispatch(std::move(held.dispatch), held.scheduler);
  }
}

void ExecutorService::AdmitDispatch(proto::Dispatch dispatch, const std::string& scheduler) {
  const ExecutorEvent admitted = DispatchAdmitted(dispatch, host_);
  // Every local shard of a gang is counted before any is admitted (an entry can fail
  // while admitted), so that the gang is reported once, when all of them finished.
  if (!scheduler.empty()) {
    for (const auto& entry : dispatch.entries) gang_reports_.Expect(scheduler, entry.gang_seq);
  }
  for (auto& entry : dispatch.entries) Admit(std::move(entry), scheduler);
  // The host-side work for every entry is done: buffers reserved, inputs resolved, shards
  // queued in gang order, before any of them ran.
  Publish(admitted);
  FlushTuples();
}

Status ExecutorService::OnRunLoop(proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(proto::RunLoop loop, in.header.As<proto::RunLoop>());
  ATOLL_ASSIGN_OR_RETURN(std::vector<LoopShard> shards,
                         admission_->LoopEntries(loop, in.data.size(), data_endpoint_.advertised));
  std::vector<std::byte> bytes(in.data[0].size());
  if (!bytes.empty()) std::memcpy(bytes.data(), in.data[0].data(), bytes.size());
  ATOLL_ASSIGN_OR_RETURN(Tensor first, Tensor::FromBytes(loop.dtype, loop.shape, std::move(bytes)));
  for (LoopShard& shard : shards) {
    for (proto::Entry& step : shard.steps) Admit(std::move(step), /*scheduler=*/"");
    mailbox_.Deliver(shard.first_input, first);
  }
  FlushTuples();
  return Status::Ok();
}

Status ExecutorService::OnCancelRun(const proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(proto::CancelRun cancel, in.header.As<proto::CancelRun>());
  const Status why = cancel.failure.empty()
                         ? Cancelled(fmt::format("run {} was cancelled by client {}", cancel.run_id,
                                                 cancel.client_id))
                         : Unavailable(cancel.failure);
  held_.FailRun(cancel.run_id, why);
  devices_.CancelRun(cancel.run_id, why);
  hub_->CancelRun(cancel.run_id, why);
  AdmitHeld();          // a held dispatch of only this run's entries waits for nothing now
  return Status::Ok();  // a notice: no reply
}

// The host-side work for one shard, done before its inputs exist.
void ExecutorService::Admit(proto::Entry entry, const std::string& scheduler) {
  Admission admitted = admission_->Admit(std::move(entry), scheduler);
  const std::shared_ptr<WorkItem>& item = admitted.item;
  if (!admitted.has_device) {
    // No stream to queue it on: fail its consumers directly.
    Completion done{item, item->failure, NowMicros(), NowMicros()};
    SendOutputs(done);
    return;
  }
  // Object-store space for outputs that land there is reserved ahead of the data.
  for (OutputReservation& r : admitted.reservations) {
    Result<bool> ahead = store_link_->ReserveOutput(std::move(r.create), r.deferred, item);
    if (!ahead.ok() && item->failure.ok()) {
      item->failure = ahead.status().WithContext("reserve output in the object store");
    }
    // The shard runs without waiting for that space, but its gang is not done before the
    // store has it: the answer counts as one more of the gang's shards.
    if (ahead.ok() && *ahead && !item->scheduler.empty()) {
      gang_reports_.Expect(item->scheduler, item->entry.gang_seq);
    }
  }
  devices_.Enqueue(item);
  if (!item->failure.ok()) {
    devices_.Fail(item, item->failure);
    return;
  }
  for (uint32_t input : admitted.store_inputs) store_link_->ReadInput(item, input);
  for (const InputKey& key : admitted.tuple_inputs) mailbox_.Await(key, item);
}

void ExecutorService::OnAheadAnswered(const WorkItem& item, const Status& answer) {
  if (item.scheduler.empty()) return;  // not a scheduler's: nobody waits for its report
  gang_reports_.ShardDone(item.scheduler, item.entry.gang_seq, /*busy_us=*/0, answer);
}

void ExecutorService::OnRm() {
  for (int i = 0; i < 64; ++i) {
    auto frames = net::RecvFrames(rm_.socket(), std::chrono::milliseconds(0));
    if (!frames.ok() || !frames->has_value()) break;
    auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/false);
    if (!in.ok()) {
      rejected_.Reject("the RM at " + rm_.endpoint(), in.status());
      continue;
    }
    switch (in->header.kind()) {
      case proto::Kind::kCompile:
        OnCompile(*in);
        AdmitHeld();
        break;
      case proto::Kind::kHostChanged:
        OnHostChanged(*in);
        break;
      case proto::Kind::kServiceChanged:
        OnServiceChanged(*in);
        break;
      case proto::Kind::kError: {
        auto err = in->header.As<proto::Error>();
        rm_.LogError(err.ok() ? proto::FromError(*err) : err.status());
        break;
      }
      default:
        break;  // late replies to setup calls
    }
  }
  FlushTuples();  // a store lost or back fails the puts of shards that ran without waiting
}

void ExecutorService::OnCompile(const proto::Incoming& in) {
  auto compile = in.header.As<proto::Compile>();
  const uint64_t function_id = compile.ok() ? compile->function_id : 0;
  Status status = compile.ok() ? admission_->Compile(std::move(compile).value()) : compile.status();
  if (status.ok()) {
    events_->Publish(topics::kFunctionCompiled, {{"function", function_id}, {"host", host_}});
    (void)net::Send(rm_.socket(), nullptr, in.header.request_id(), proto::Ok{});
  } else {
    (void)net::Send(rm_.socket(), nullptr, in.header.request_id(), proto::ToError(status));
  }
}

void ExecutorService::OnHostChanged(const proto::Incoming& in) {
  auto changed = in.header.As<proto::HostChanged>();
  if (!changed.ok() || changed->host == host_) return;
  if (!changed->lost) {
    admission_->PeerBack(changed->control_endpoint, changed->data_endpoint);
    hub_->HostBack(changed->data_endpoint);
    return;
  }
  const Status lost = Unavailable(changed->reason);
  admission_->PeerLost(changed->control_endpoint, changed->data_endpoint, lost);
  // A shard waiting for the lost host's tuples would wait for ever, and one waiting for its
  // message in a collective until the collective timeout, holding its device (and every
  // gang queued behind it) meanwhile: both fail now and pass the error on to their
  // consumers and results.
  mailbox_.FailWaitingOn(changed->control_endpoint, lost);
  hub_->HostLost(changed->data_endpoint, lost);
  // Its consumers there are gone with it: what waits in the outbox for it would only be
  // tried until input_wait_ms.
  if (const uint64_t dropped = outbox_.PeerLost(changed->data_endpoint); dropped > 0) {
    spdlog::info("dropped {} tuples for lost host {}", dropped, changed->host);
  }
}

// ---------------------------------------------------------------------------------------
// Data plane.

void ExecutorService::OnData() {
  net::ServeRequests(data_, *events_, std::string(topics::kErrorExecutor), rejected_,
                     [this](proto::Incoming& in) {
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
  received_.AddBatch(batch.tuples.size(), bytes, NowMicros());
  for (size_t i = 0; i < batch.tuples.size(); ++i) {
    const auto& h = batch.tuples[i];
    if (h.collective()) {
      hub_->Receive(h, std::move(values[i]));
    } else {
      router_->Receive(h, std::move(values[i]));
    }
  }
  return Status::Ok();
}

void ExecutorService::OnCompletions() {
  CompletionQueue::Batch batch = completions_.Take();
  for (auto& t : batch.outgoing) {
    router_->Queue(t.endpoint, std::move(t.header), std::move(t.value));
  }
  for (const auto& c : batch.done) SendOutputs(c);
  FlushTuples();
}

void ExecutorService::SendOutputs(const Completion& done) {
  // The outputs first: a reader or a consumer waits for them; the report and the event
  // only say what happened (stamped when the loop took the shard).
  const int64_t taken_us = NowMicros();
  router_->Route(done);
  if (!done.item->scheduler.empty()) {
    gang_reports_.ShardDone(done.item->scheduler, done.item->entry.gang_seq,
                            static_cast<uint64_t>(done.end_us - done.start_us),
                            done.outputs.status());
  }
  Publish(ShardFinished(done, host_, device_ids_), taken_us);
}

void ExecutorService::FlushTuples() {
  // Tuples before reports: a consumer on another host waits for them.
  for (const Status& error : outbox_.Flush()) PublishError(error);
  for (const auto& [scheduler, done] : gang_reports_.TakeReady()) {
    zmq::message_t routing(scheduler.data(), scheduler.size());
    Status sent = net::Send(control_, &routing, 0, done);
    if (!sent.ok()) PublishError(sent.WithContext("report finished gangs"));
  }
}

// ---------------------------------------------------------------------------------------
// Object store.

void ExecutorService::OnStore() {
  for (int i = 0; i < 64; ++i) {
    auto frames = net::RecvFrames(store_.socket(), std::chrono::milliseconds(0));
    if (!frames.ok() || !frames->has_value()) break;
    auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/false);
    if (!in.ok()) {
      rejected_.Reject("the object store at " + store_.endpoint(), in.status());
      continue;
    }
    store_link_->OnReply(*in);
  }
  if (store_restarted_) {
    DetachRestartedStore();
    Status attached = AttachStore(std::chrono::milliseconds(config_.heartbeat_ms));
    if (!attached.ok()) PublishError(attached);
  }
  FlushTuples();
}

void ExecutorService::DetachRestartedStore() {
  store_link_->Detach(Unavailable(fmt::format(
      "the object store of host {} restarted, and the objects it held are gone", host_)));
}

Status ExecutorService::AttachStore(std::chrono::milliseconds timeout) {
  auto hello = store_.Call<proto::StoreHelloReply>(proto::StoreHello{}, timeout);
  if (!hello.ok()) {
    return hello.status().WithContext("say hello to the object store at " + store_.endpoint());
  }
  ATOLL_ASSIGN_OR_RETURN(*arena_, ShmRegion::Open(hello->arena_name));
  store_link_->Attach(hello->instance);
  store_restarted_ = false;
  spdlog::info("mapped the object store's arena {} (instance {:x})", hello->arena_name,
               hello->instance);
  return Status::Ok();
}

void ExecutorService::OnServiceChanged(const proto::Incoming& in) {
  auto changed = in.header.As<proto::ServiceChanged>();
  if (!changed.ok() || changed->role != proto::Heartbeat::kStore || changed->name != host_) return;
  // A store restart this executor found itself (a reply from a new instance) is old news
  // when the RM's notice of it comes: the link is on the new instance already, with
  // reservations granted and outputs to seal there.
  const bool current = changed->instance != 0 && changed->instance == store_link_->instance();
  if (changed->lost) {
    if (changed->instance != 0 && !current) return;  // an instance it has left behind
    // Attached again when the RM says it is back: asking a dead store would only block.
    store_link_->Detach(Unavailable(changed->reason));
    store_restarted_ = false;
    return;
  }
  if (current && store_link_->attached()) return;
  // AttachStore's hello drops the replies it meets on the store socket: nothing may be
  // pending there (a lost notice that never came would leave reservations pending).
  if (store_link_->attached()) DetachRestartedStore();
  Status attached = AttachStore(std::chrono::milliseconds(config_.heartbeat_ms));
  if (!attached.ok()) PublishError(attached);
}

}  // namespace atl::executor
