#include "services/objectstore/store_service.h"

#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/net/request_server.h"
#include "common/net/sent_counters.h"
#include "common/proto/ids.h"

namespace atl::store {

std::string StoreService::ShardName(uint64_t object, uint32_t shard) {
  return "object " + std::to_string(object) + " shard " + std::to_string(shard);
}

// ---------------------------------------------------------------------------------------
// Sending.

StoreService::ReplyTo StoreService::ReplyToOf(const proto::Incoming& in) {
  ReplyTo to;
  if (in.routing_id) to.routing_id = zmq::message_t(in.routing_id->data(), in.routing_id->size());
  to.request_id = in.header.request_id();
  return to;
}

void StoreService::LogUnsent(proto::Kind kind, uint64_t request_id, const Status& sent) {
  spdlog::debug("{} reply to request {} not sent: {}", proto::KindName(kind), request_id,
                sent.ToString());
}

void StoreService::SendError(const ReplyTo& to, const Status& status) {
  Send(to, proto::ToError(status));
}

Result<std::unique_ptr<StoreService>> StoreService::Create(zmq::context_t& context,
                                                           StoreOptions options) {
  if (options.heartbeat.count() <= 0) return InvalidArgument("heartbeat period must be > 0 ms");
  if (options.liveness == 0) return InvalidArgument("liveness must be > 0");
  if (options.arena_bytes < ArenaAllocator::kAlignment) {
    return InvalidArgument("arena of " + std::to_string(options.arena_bytes) +
                           " bytes is too small (at least " +
                           std::to_string(ArenaAllocator::kAlignment) + ")");
  }
  if (options.arena_name.empty()) options.arena_name = ShmRegion::MakeName(options.host);
  ATOLL_ASSIGN_OR_RETURN(DeadlineTimer timer, DeadlineTimer::Create());
  // One region backs the arena and every device's memory (memory_pools.h).
  const uint64_t region_bytes =
      MemoryPools(options.arena_bytes, options.device_bytes).region_bytes();
  // A store of this host killed with its supervisor (a container that died) left its region
  // behind: its memory is only freed, and its name only free again, once it is removed.
  for (const std::string& name : ShmRegion::RemoveAbandoned(options.host)) {
    spdlog::warn("removed shared memory {}, left by a store of host {} that died", name,
                 options.host);
  }
  if (auto free = ShmRegion::FreeBytes(); free.ok() && *free < region_bytes) {
    spdlog::warn(
        "/dev/shm has {} MiB free, less than the {} MiB of this store's region (the arena and "
        "every device's memory): a write past what is free kills the store or the executor "
        "(SIGBUS). Give /dev/shm more room (a container's shm_size) or lower arena_mb and "
        "device_memory_mb",
        *free >> 20, region_bytes >> 20);
  }
  ATOLL_ASSIGN_OR_RETURN(ShmRegion arena, ShmRegion::Create(options.arena_name, region_bytes));
  std::unique_ptr<StoreService> service(
      new StoreService(context, std::move(options), std::move(arena), std::move(timer)));
  ATOLL_ASSIGN_OR_RETURN(service->endpoint_,
                         net::Bind(service->socket_, service->options_.bind_endpoint));
  if (!service->options_.events_in.empty()) {
    ATOLL_RETURN_IF_ERROR(service->events_.Connect(service->options_.events_in));
  }
  if (!service->options_.rm_endpoint.empty()) {
    service->rm_ = std::make_unique<net::Requester>(context, service->options_.rm_endpoint);
    ATOLL_RETURN_IF_ERROR(service->rm_->Connect());
    service->owners_ = OwnerCache(
        service->rm_.get(),
        OwnerCache::LookupTimeout(service->options_.heartbeat, service->options_.liveness));
    service->loop_.AddSocket("store.rm", service->rm_->socket(),
                             [s = service.get()] { s->OnRm(); });
    service->loop_.AddTimer("store.heartbeat", service->options_.heartbeat,
                            [s = service.get()] { s->HeartbeatRm(); });
  }
  return service;
}

StoreService::StoreService(zmq::context_t& context, StoreOptions options, ShmRegion arena,
                           DeadlineTimer timer)
    : options_(std::move(options)),
      arena_(std::move(arena)),
      directory_(options_.arena_bytes, options_.heartbeat * options_.liveness, clock_,
                 options_.device_bytes,
                 {options_.quota_objects, options_.quota_bytes, "on host " + options_.host}),
      client_stall_guard_("the object store of host " + options_.host, options_.heartbeat,
                          options_.heartbeat, options_.liveness),
      socket_(net::MakeSocket(context, zmq::socket_type::router)),
      instance_((uint64_t{std::random_device{}()} << 32) | std::random_device{}()),
      events_(context, "objectstore/" + options_.host),
      deadline_timer_(std::move(timer)) {
  loop_.AddSocket("store.requests", socket_, [this] { OnReadable(); });
  loop_.AddFd("store.get_deadlines", deadline_timer_.fd(), [this] {
    deadline_timer_.Drain();
    armed_.reset();
    ExpireWaiters();
  });
  loop_.AddTimer("store.expire_clients", options_.heartbeat, [this] { ExpireClients(); });
}

void StoreService::Run() {
  spdlog::info("serving on {}, arena {} ({} bytes), clients expire after {} ms", endpoint_,
               arena_.name(), arena_.size(), (options_.heartbeat * options_.liveness).count());
  loop_.Run();
  for (const auto& stats : loop_.Stats()) {
    spdlog::debug("handler {}: {} calls, {} us busy", stats.name, stats.calls,
                  std::chrono::duration_cast<std::chrono::microseconds>(stats.busy).count());
  }
  spdlog::info("stopping; {} objects, {} waiting gets dropped", directory_.Stats().objects,
               waiters_.size());
}

// ---------------------------------------------------------------------------------------
// Receiving and dispatching.

void StoreService::OnReadable() {
  net::ServeRequests(socket_, events_, "error.store", rejected_,
                     [this](proto::Incoming& in) { return Dispatch(in); });
}

Status StoreService::Dispatch(const proto::Incoming& in) {
  switch (in.header.kind()) {
    case proto::Kind::kStoreHello:
      return OnStoreHello(in);
    case proto::Kind::kCreateObject:
      return OnCreate(in);
    case proto::Kind::kSealObject:
      return OnSeal(in);
    case proto::Kind::kPutObject:
      return OnPut(in);
    case proto::Kind::kGetObject:
      return OnGet(in);
    case proto::Kind::kReleaseObject:
      return OnRelease(in);
    case proto::Kind::kHeartbeat:
      return OnHeartbeat(in);
    case proto::Kind::kGoodbye:
      return OnGoodbye(in);
    case proto::Kind::kGetStoreStats:
      return OnStats(in);
    case proto::Kind::kHostChanged:
      return OnHostChanged(in);
    case proto::Kind::kOwnersKnown:
      return owners_.LearnFrom(in);  // a notice from the RM: no reply
    case proto::Kind::kSaveShards:
      return OnSaveShards(in);
    case proto::Kind::kCommitCheckpoint:
      return OnCommitCheckpoint(in);
    case proto::Kind::kReadCheckpointIndex:
      return OnReadCheckpointIndex(in);
    case proto::Kind::kLoadShards:
      return OnLoadShards(in);
    default:
      return InvalidArgument("the object store does not handle " +
                             std::string(proto::KindName(in.header.kind())) + " messages");
  }
}

// ---------------------------------------------------------------------------------------
// Handlers.

Status StoreService::OnStoreHello(const proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::StoreHello>());
  (void)req;
  Send(ReplyToOf(in), proto::StoreHelloReply{arena_.name(), directory_.Stats().arena_bytes,
                                             arena_.size(), instance_});
  return Status::Ok();
}

Status StoreService::CheckObjectOwner(const proto::Incoming& in, uint64_t object,
                                      std::string_view action) {
  if (in.sender.member()) return Status::Ok();
  return owners_.CheckClient(in.sender, proto::ClientOfObject(object),
                             std::string(action) + " object " + std::to_string(object));
}

Status StoreService::CheckNewObject(const proto::Incoming& in, uint64_t object,
                                    uint64_t owner_client) {
  // Objects without a live owner are never made: nothing would ever collect them.
  ATOLL_ASSIGN_OR_RETURN(const std::string owner_user, owners_.ClientUser(owner_client));
  if (in.sender.member()) return Status::Ok();
  if (proto::ClientOfObject(object) != owner_client) {
    return PermissionDenied("object " + std::to_string(object) + " is client " +
                            std::to_string(proto::ClientOfObject(object)) +
                            "'s, not its owner's (" + std::to_string(owner_client) + ")");
  }
  return proto::RequireClient(in.sender, owner_client, owner_user, "write");
}

Status StoreService::OnCreate(const proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::CreateObject>());
  ATOLL_RETURN_IF_ERROR(proto::RequireMember(in.sender, "reserve store memory (CreateObject)"));
  return Reserve(in, std::move(req), std::nullopt);
}

Status StoreService::Reserve(const proto::Incoming& in, proto::CreateObject req,
                             std::optional<std::span<const std::byte>> put) {
  if (Status owner = CheckNewObject(in, req.object_id, req.owner_client); !owner.ok()) {
    // Never made (its owner gone, or the RM not there to vouch for it): readers already
    // waiting for it would otherwise wait out their whole timeout.
    CancelWaiters(req.object_id, "will not be created: " + owner.ToString());
    return owner;
  }
  ATOLL_ASSIGN_OR_RETURN(const uint64_t nbytes, Directory::ShardBytes(req.dtype, req.shape));
  ATOLL_RETURN_IF_ERROR(directory_.pools().Check(req.device));
  if (req.device == proto::CreateObject::kHost) {
    ATOLL_ASSIGN_OR_RETURN(
        ShardInfo info,
        directory_.Create(req.object_id, req.shard, req.owner_client, req.dtype, req.shape));
    AnswerCreated(ReplyToOf(in), req, info, put);
    return Status::Ok();
  }
  if (!directory_.CanEverFit(req.device, nbytes)) return RejectForever(req, nbytes);
  // Over quota now is refused now: queued, it would only be refused at its turn.
  if (Status quota = directory_.CheckQuota(req.owner_client, req.object_id, nbytes); !quota.ok()) {
    return Refuse(req, quota);
  }
  auto& queue = pending_[req.device];
  if (queue.empty()) {
    auto created = directory_.Create(req.object_id, req.shard, req.owner_client, req.dtype,
                                     req.shape, req.device);
    if (created.ok()) {
      AnswerCreated(ReplyToOf(in), req, *created, put);
      return Status::Ok();
    }
    if (created.status().code() != Code::kOutOfMemory) return created.status();
  }
  // Backpressure: the device is full now; the request waits for a free, behind earlier ones.
  const DirectoryStats stats = directory_.Stats();
  events_.Publish("object.waiting", {{"object", req.object_id},
                                     {"shard", uint64_t{req.shard}},
                                     {"owner", req.owner_client},
                                     {"host", options_.host},
                                     {"device", int64_t{req.device}},
                                     {"nbytes", nbytes},
                                     {"device_bytes_in_use", stats.device_bytes_in_use[req.device]},
                                     {"device_bytes", stats.device_bytes[req.device]},
                                     {"queued", uint64_t{queue.size()}}});
  std::optional<std::vector<std::byte>> held;
  if (put) held.emplace(put->begin(), put->end());
  queue.push_back({ReplyToOf(in), std::move(req), std::move(held)});
  return Status::Ok();
}

Status StoreService::RejectForever(const proto::CreateObject& req, uint64_t nbytes) {
  const Status error = OutOfMemory(
      ShardName(req.object_id, req.shard) + " needs " + std::to_string(nbytes) + " bytes but " +
      MemoryPools::PoolName(req.device) + " of host " + options_.host + " has " +
      std::to_string(directory_.pools().capacity(req.device)) + " bytes in all: it can never fit");
  return Refuse(req, error);
}

Status StoreService::Refuse(const proto::CreateObject& req, const Status& error) {
  ATOLL_RETURN_IF_ERROR(
      directory_.Reject(req.object_id, req.shard, req.owner_client, req.dtype, req.shape, error));
  events_.Publish(
      "object.sealed",
      {{"object", req.object_id}, {"shard", uint64_t{req.shard}}, {"error", error.ToString()}});
  WakeWaiters(req.object_id, req.shard);
  FreeIfReleased(req.object_id);
  return error;
}

void StoreService::AnswerCreated(const ReplyTo& to, const proto::CreateObject& req,
                                 const ShardInfo& info,
                                 std::optional<std::span<const std::byte>> put) {
  if (put) {
    if (!put->empty()) std::memcpy(arena_.data() + info.offset, put->data(), put->size());
    if (Status sealed = directory_.Seal(req.object_id, req.shard); !sealed.ok()) {
      SendError(to, sealed);
      return;
    }
    Send(to, proto::Ok{});
    AnnouncePut(req.object_id, req.shard, req.owner_client, info.nbytes);
    return;
  }
  Send(to, proto::CreateObjectReply{info.offset, info.nbytes, instance_});
  events_.Publish("object.created", {{"object", req.object_id},
                                     {"shard", uint64_t{req.shard}},
                                     {"owner", req.owner_client},
                                     {"device", int64_t{req.device}},
                                     {"nbytes", info.nbytes}});
}

void StoreService::RetryPending() {
  for (auto& [device, queue] : pending_) {
    while (!queue.empty()) {
      const proto::CreateObject& req = queue.front().request;
      auto created = directory_.Create(req.object_id, req.shard, req.owner_client, req.dtype,
                                       req.shape, req.device);
      if (!created.ok() && created.status().code() == Code::kOutOfMemory) break;  // still full
      // Out of the queue first: a refusal may free an object and so retry the queues.
      const PendingCreate head = std::move(queue.front());
      queue.pop_front();
      if (created.ok()) {
        std::optional<std::span<const std::byte>> put;
        if (head.put) put.emplace(*head.put);
        AnswerCreated(head.to, head.request, *created, put);
      } else if (created.status().code() == Code::kResourceExhausted) {
        // Its owner's other reservations took the quota while it waited.
        SendError(head.to, Refuse(head.request, created.status()));
      } else {
        SendError(head.to, created.status());
      }
    }
  }
}

void StoreService::DropPending(uint64_t client, const std::string& why) {
  for (auto& [device, queue] : pending_) {
    for (auto it = queue.begin(); it != queue.end();) {
      if (it->request.owner_client != client) {
        ++it;
        continue;
      }
      SendError(it->to, Cancelled(ShardName(it->request.object_id, it->request.shard) +
                                  " will not be created: " + why));
      it = queue.erase(it);
    }
  }
}

Status StoreService::OnSeal(const proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::SealObject>());
  ATOLL_RETURN_IF_ERROR(proto::RequireMember(in.sender, "seal an object"));
  const Status error = req.error_code == 0
                           ? Status::Ok()
                           : proto::FromError(proto::Error{req.error_code, req.error});
  if (Status sealed = directory_.Seal(req.object_id, req.shard, error); !sealed.ok()) {
    // Unknown here (reserved from a store process before this one, or collected): what
    // its readers wait for will never be sealed here.
    if (sealed.code() == Code::kNotFound) {
      CancelWaiters(req.object_id, "will not be sealed here: " + sealed.ToString());
    }
    return sealed;
  }
  Send(ReplyToOf(in), proto::Ok{});
  const int64_t sealed_us = NowMicros();
  WakeWaiters(req.object_id, req.shard);  // its readers before the event, as for a put
  EventFields fields{{"object", req.object_id}, {"shard", uint64_t{req.shard}}};
  if (!error.ok()) fields.emplace_back("error", error.ToString());
  events_.Publish("object.sealed", fields, sealed_us);
  FreeIfReleased(req.object_id);
  return Status::Ok();
}

Status StoreService::OnPut(const proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::PutObject>());
  if (in.data.size() != 1) {
    return InvalidArgument("PutObject for " + ShardName(req.object_id, req.shard) +
                           " needs exactly one data frame, got " + std::to_string(in.data.size()));
  }
  const auto& frame = in.data[0];
  if (req.device != proto::CreateObject::kHost) {
    // An executor's output, written whole: it waits for room in the device's memory like a
    // reservation would, its bytes with it.
    ATOLL_RETURN_IF_ERROR(proto::RequireMember(in.sender, "put into a device's memory"));
    ATOLL_ASSIGN_OR_RETURN(const uint64_t nbytes, Directory::ShardBytes(req.dtype, req.shape));
    if (frame.size() != nbytes) {
      return InvalidArgument(ShardName(req.object_id, req.shard) + ": " +
                             std::to_string(frame.size()) + " data bytes do not match its " +
                             std::to_string(nbytes));
    }
    return Reserve(in,
                   proto::CreateObject{req.object_id, req.shard, req.owner_client, req.dtype,
                                       req.shape, req.device},
                   std::span(static_cast<const std::byte*>(frame.data()), frame.size()));
  }
  ATOLL_RETURN_IF_ERROR(CheckNewObject(in, req.object_id, req.owner_client));
  ATOLL_ASSIGN_OR_RETURN(
      ShardInfo info,
      directory_.Put(req.object_id, req.shard, req.owner_client, req.dtype, req.shape,
                     {static_cast<const std::byte*>(frame.data()), frame.size()},
                     {arena_.data(), arena_.size()}));
  Send(ReplyToOf(in), proto::Ok{});
  AnnouncePut(req.object_id, req.shard, req.owner_client, info.nbytes);
  return Status::Ok();
}

void StoreService::AnnouncePut(uint64_t object, uint32_t shard, uint64_t owner, uint64_t nbytes) {
  // Its readers first: they wait; the events only say what happened, and when.
  const int64_t sealed_us = NowMicros();
  WakeWaiters(object, shard);
  events_.Publish(
      "object.created",
      {{"object", object}, {"shard", uint64_t{shard}}, {"owner", owner}, {"nbytes", nbytes}},
      sealed_us);
  events_.Publish("object.sealed", {{"object", object}, {"shard", uint64_t{shard}}}, sealed_us);
  FreeIfReleased(object);
}

Status StoreService::OnGet(const proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::GetObject>());
  ATOLL_RETURN_IF_ERROR(CheckObjectOwner(in, req.object_id, "read"));
  auto found = directory_.Find(req.object_id, req.shard);
  if (found.ok() && (*found)->sealed) {
    AnswerSealed(ReplyToOf(in), **found, req.inline_data);
    return Status::Ok();
  }
  if (req.timeout_ms == 0) {
    if (!found.ok()) return found.status();
    return NotFound(ShardName(req.object_id, req.shard) + " is not ready (created, not sealed)");
  }
  const auto timeout = std::chrono::milliseconds(req.timeout_ms);
  AddWaiter(ShardKey{req.object_id, req.shard},
            Waiter{ReplyToOf(in), req.inline_data, req.timeout_ms, clock_.Now() + timeout});
  return Status::Ok();
}

Status StoreService::OnRelease(const proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::ReleaseObject>());
  ATOLL_RETURN_IF_ERROR(CheckObjectOwner(in, req.object_id, "release"));
  if (!in.sender.member() && req.owner_client != proto::ClientOfObject(req.object_id)) {
    return PermissionDenied("release object " + std::to_string(req.object_id) + " as client " +
                            std::to_string(req.owner_client) + ": it is client " +
                            std::to_string(proto::ClientOfObject(req.object_id)) + "'s");
  }
  ATOLL_ASSIGN_OR_RETURN(const ReleaseOutcome outcome,
                         directory_.Release(req.object_id, req.owner_client, req.shards));
  Send(ReplyToOf(in), proto::Ok{});
  switch (outcome) {
    case ReleaseOutcome::kHeld:
    case ReleaseOutcome::kRemembered:
      break;
    case ReleaseOutcome::kFreed:
      PublishFreed(req.object_id);
      CancelWaiters(req.object_id, "was released before it was sealed");
      RetryPending();
      break;
    case ReleaseOutcome::kFreedOnSeal:
      // Nobody holds it any more: its readers need not wait for the write in progress.
      CancelWaiters(req.object_id, "was released before it was sealed");
      break;
  }
  return Status::Ok();
}

void StoreService::PublishFreed(uint64_t object) {
  events_.Publish("object.freed", {{"object", object}, {"reason", std::string("released")}});
}

void StoreService::FreeIfReleased(uint64_t object) {
  if (!directory_.FreeIfReleased(object)) return;
  PublishFreed(object);
  RetryPending();
}

Status StoreService::OnHeartbeat(const proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::Heartbeat>());
  if (req.role == proto::Heartbeat::kExecutor) return Status::Ok();  // not tracked here
  ATOLL_ASSIGN_OR_RETURN(const uint64_t client, proto::HeartbeatClientId(req));
  ATOLL_RETURN_IF_ERROR(owners_.CheckClient(in.sender, client, "heartbeat"));
  directory_.Heartbeat(client);
  return Status::Ok();
}

Status StoreService::OnGoodbye(const proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::Goodbye>());
  ATOLL_RETURN_IF_ERROR(owners_.CheckGoodbye(in.sender, req.client_id));
  const Collected collected = directory_.Goodbye(req.client_id);
  Send(ReplyToOf(in), proto::Ok{});
  PublishCollected(collected);
  return Status::Ok();
}

Status StoreService::OnHostChanged(const proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::HostChanged>());
  ATOLL_RETURN_IF_ERROR(proto::RequireMember(in.sender, "report a host change"));
  if (!req.lost || req.host != options_.host) return Status::Ok();  // not a reply: no answer
  const Status error = Unavailable(req.reason);
  std::vector<ShardKey> failed;
  // Reservations still queued for the lost executor: recorded failed, so readers get why.
  for (auto& [device, queue] : pending_) {
    for (const auto& p : queue) {
      const auto& r = p.request;
      if (directory_.Reject(r.object_id, r.shard, r.owner_client, r.dtype, r.shape, error).ok()) {
        failed.emplace_back(r.object_id, r.shard);
      }
    }
    queue.clear();
  }
  for (const auto& key : directory_.FailUnsealedDeviceShards(error)) failed.push_back(key);
  for (const auto& [object, shard] : failed) {
    WakeWaiters(object, shard);
    FreeIfReleased(object);
  }
  events_.Publish("store.executor_lost", {{"host", options_.host},
                                          {"shards_failed", uint64_t{failed.size()}},
                                          {"reason", req.reason}});
  return Status::Ok();
}

Status StoreService::OnStats(const proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::GetStoreStats>());
  (void)req;
  const DirectoryStats stats = directory_.Stats();
  Send(ReplyToOf(in), proto::StoreStats{stats.objects, stats.bytes_in_use, stats.arena_bytes,
                                        stats.objects_per_owner, stats.device_bytes_in_use,
                                        stats.device_bytes, stats.tombstones_per_owner});
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------
// Waiting gets and collection.

void StoreService::AnswerSealed(const ReplyTo& to, const ShardInfo& info, bool inline_data) {
  if (!info.error.ok()) {
    SendError(to, info.error);
    return;
  }
  net::Frames data;
  if (inline_data) data.emplace_back(arena_.data() + info.offset, info.nbytes);
  Send(to, proto::GetObjectReply{info.dtype, info.shape, info.offset, info.nbytes, instance_},
       std::move(data));
}

void StoreService::WakeWaiters(uint64_t object, uint32_t shard) {
  auto [begin, end] = waiters_.equal_range(ShardKey{object, shard});
  if (begin == end) return;
  auto found = directory_.Find(object, shard);
  if (!found.ok() || !(*found)->sealed) return;
  for (auto it = begin; it != end; ++it) {
    AnswerSealed(it->second.to, **found, it->second.inline_data);
  }
  waiters_.erase(begin, end);
}

void StoreService::CancelWaiters(uint64_t object, const std::string& why) {
  auto it = waiters_.lower_bound(ShardKey{object, 0});
  while (it != waiters_.end() && it->first.first == object) {
    SendError(it->second.to, Cancelled(ShardName(object, it->first.second) + " " + why));
    it = waiters_.erase(it);
  }
}

void StoreService::AddWaiter(ShardKey key, Waiter waiter) {
  const TimePoint deadline = waiter.deadline;
  waiters_.emplace(key, std::move(waiter));
  if (!armed_ || deadline < *armed_) {
    deadline_timer_.ArmAt(deadline);
    armed_ = deadline;
  }
}

void StoreService::ExpireWaiters() {
  // Waiters answered by a seal or cancelled leave the timer armed; it then fires for nothing
  // and is re-armed here for whatever is left.
  const TimePoint now = clock_.Now();
  std::optional<TimePoint> next;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->second.deadline > now) {
      if (!next || it->second.deadline < *next) next = it->second.deadline;
      ++it;
      continue;
    }
    const auto [object, shard] = it->first;
    SendError(it->second.to, DeadlineExceeded(ShardName(object, shard) + " was not sealed within " +
                                              std::to_string(it->second.timeout_ms) + " ms" +
                                              WaitingForRoom(object, shard)));
    it = waiters_.erase(it);
  }
  if (next && (!armed_ || *next < *armed_)) {
    deadline_timer_.ArmAt(*next);
    armed_ = next;
  }
}

std::string StoreService::WaitingForRoom(uint64_t object, uint32_t shard) const {
  const MemoryPools& pools = directory_.pools();
  auto use = [&](int32_t pool) {
    return fmt::format("{} of {} bytes held by objects not released yet", pools.used_bytes(pool),
                       pools.capacity(pool));
  };
  constexpr const char* kRemedy =
      "; release what is no longer needed, or give the store more memory";
  for (const auto& [pool, queue] : pending_) {
    for (size_t ahead = 0; ahead < queue.size(); ++ahead) {
      const proto::CreateObject& req = queue[ahead].request;
      if (req.object_id == object && req.shard == shard) {
        return fmt::format(
            ": its producer's output waits for room in {} ({}, {} more requests "
            "queued ahead of it){}",
            MemoryPools::PoolName(pool), use(pool), ahead, kRemedy);
      }
    }
  }
  // Its producer's request may not have come yet, held up by the same shortage.
  for (const auto& [pool, queue] : pending_) {
    if (queue.empty()) continue;
    return fmt::format(
        ": {} has no room now ({}, {} requests waiting for it), which may hold up "
        "its producer{}",
        MemoryPools::PoolName(pool), use(pool), queue.size(), kRemedy);
  }
  return "";
}

void StoreService::ExpireClients() {
  if (client_stall_guard_.MayJudge(std::chrono::steady_clock::now())) {
    for (const Collected& collected : directory_.Expire()) PublishCollected(collected);
  }
  // Memory in use, for live views (`atoll top`, `atoll dashboard`): one event per period.
  const DirectoryStats stats = directory_.Stats();
  events_.Publish("store.stats", {{"host", options_.host},
                                  {"objects", stats.objects},
                                  {"bytes_in_use", stats.bytes_in_use},
                                  {"arena_bytes", stats.arena_bytes}});
  events_.Publish("net.stats", net::SentCountFields());
}

void StoreService::HeartbeatRm() {
  Status sent = rm_->Post(proto::Heartbeat{proto::Heartbeat::kStore, options_.host, instance_,
                                           loop_.LongestStallMicros()});
  if (!sent.ok()) spdlog::warn("heartbeat: {}", sent.ToString());
}

void StoreService::OnRm() { (void)rm_->TakeErrors(); }

void StoreService::PublishCollected(const Collected& collected) {
  const std::string reason(CollectReasonName(collected.reason));
  spdlog::info("client {} ({}): collected {} objects", collected.client, reason,
               collected.objects.size());
  DropPending(collected.client, "client " + std::to_string(collected.client) + ": " + reason);
  owners_.ForgetClient(collected.client);
  if (collected.objects.empty()) return;
  events_.Publish("object.collected", {{"client", collected.client},
                                       {"count", uint64_t{collected.objects.size()}},
                                       {"reason", reason}});
  for (uint64_t object : collected.objects) {
    CancelWaiters(object, "was collected (client " + std::to_string(collected.client) + ": " +
                              reason + ") before it was sealed");
  }
  RetryPending();
}

}  // namespace atl::store
