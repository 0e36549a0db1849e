#include "services/objectstore/store_service.h"

#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/net/event_topics.h"
#include "common/net/request_server.h"
#include "common/net/sent_counters.h"
#include "common/proto/ids.h"

namespace atl::store {

// ---------------------------------------------------------------------------------------
// Sending.

ReplyTo StoreService::ReplyToOf(const proto::Incoming& in) {
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
  // With two I/O threads or more, the requests (and the large objects they carry) take the
  // first and the RM's connection the second: a transfer of hundreds of MiB, which CURVE
  // encrypts on its I/O thread, does not hold up the heartbeats that keep the store alive.
  const bool own_rm_io_thread = context.get(zmq::ctxopt::io_threads) >= 2;
  if (own_rm_io_thread) service->socket_.set(zmq::sockopt::affinity, uint64_t{1});
  ATOLL_ASSIGN_OR_RETURN(service->endpoint_,
                         net::Bind(service->socket_, service->options_.bind_endpoint));
  if (!service->options_.events_in.empty()) {
    ATOLL_RETURN_IF_ERROR(service->events_.Connect(service->options_.events_in));
  }
  if (!service->options_.rm_endpoint.empty()) {
    service->rm_ = std::make_unique<net::Requester>(context, service->options_.rm_endpoint);
    if (own_rm_io_thread) service->rm_->socket().set(zmq::sockopt::affinity, uint64_t{2});
    ATOLL_RETURN_IF_ERROR(service->rm_->Connect());
    service->owners_ = OwnerCache(
        service->rm_.get(),
        OwnerCache::LookupTimeout(service->options_.heartbeat, service->options_.liveness));
    service->loop_.AddSocket("store.rm", service->rm_->socket(),
                             [s = service.get()] { s->OnRm(); });
    service->loop_.AddTimer("store.heartbeat", service->options_.heartbeat,
                            [s = service.get()] { s->HeartbeatRm(); });
    // Its clients heartbeat the RM alone: their liveness is the RM's table, late after two
    // periods without one.
    service->directory_.FollowClientTable(2 * service->options_.heartbeat);
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
      room_queue_(directory_, options_.host),
      deadline_timer_(std::move(timer)) {
  loop_.AddSocket("store.requests", socket_, [this] { OnReadable(); });
  loop_.AddFd("store.get_deadlines", deadline_timer_.fd(), [this] {
    deadline_timer_.Drain();
    ExpireWaiters();
  });
  loop_.AddTimer("store.expire_clients", options_.heartbeat, [this] { ExpireClients(); });
}

void StoreService::Run() {
  spdlog::info("serving on {}, arena {} ({} bytes), clients expire after {} ms", endpoint_,
               arena_.name(), arena_.size(), (options_.heartbeat * options_.liveness).count());
  loop_.Run();
  if (checkpoint_worker_.in_flight() > 0) {
    spdlog::info("stopping the checkpoint work in progress ({} requests unanswered)",
                 checkpoint_worker_.in_flight());
  }
  checkpoint_worker_.Stop();
  for (const auto& stats : loop_.Stats()) {
    spdlog::debug("handler {}: {} calls, {} us busy", stats.name, stats.calls,
                  std::chrono::duration_cast<std::chrono::microseconds>(stats.busy).count());
  }
  spdlog::info("stopping; {} objects, {} waiting gets dropped", directory_.Stats().objects,
               waiting_reads_.size());
}

// ---------------------------------------------------------------------------------------
// Receiving and dispatching.

void StoreService::OnReadable() {
  net::ServeRequests(socket_, events_, std::string(topics::kErrorStore), rejected_,
                     [this](proto::Incoming& in) { return requests_.Dispatch(*this, in); });
}

net::RequestTable<StoreService> StoreService::MakeRequestTable() {
  using net::MaySend;
  net::RequestTable<StoreService> table("the object store");
  // Anyone: a client acts only on its own objects and as itself, which each handler checks
  // against the owner the request names (CheckObjectOwner, CheckNewObject, OwnerCache).
  table.Add<proto::StoreHello>(MaySend::Anyone(), &StoreService::OnStoreHello);
  table.Add<proto::PutObject>(MaySend::Anyone(), &StoreService::OnPut);  // devices': members
  table.Add<proto::GetObject>(MaySend::Anyone(), &StoreService::OnGet);
  table.Add<proto::ReleaseObject>(MaySend::Anyone(), &StoreService::OnRelease);
  table.Add<proto::Heartbeat>(MaySend::Anyone(), &StoreService::OnHeartbeat);
  table.Add<proto::Goodbye>(MaySend::Anyone(), &StoreService::OnGoodbye);
  table.Add<proto::GetStoreStats>(MaySend::Anyone(), &StoreService::OnStats);
  table.Add<proto::SaveShards>(MaySend::Anyone(), &StoreService::OnSaveShards);
  table.Add<proto::CommitCheckpoint>(MaySend::Anyone(), &StoreService::OnCommitCheckpoint);
  table.Add<proto::ReadCheckpointIndex>(MaySend::Anyone(), &StoreService::OnReadCheckpointIndex);
  table.Add<proto::LoadShards>(MaySend::Anyone(), &StoreService::OnLoadShards);
  // Executors' reservations and seals, and the RM's notices.
  table.Add<proto::CreateObject>(MaySend::Members("reserve store memory (CreateObject)"),
                                 &StoreService::OnCreate);
  table.Add<proto::SealObject>(MaySend::Members("seal an object"), &StoreService::OnSeal);
  table.Add<proto::UnpinObjects>(MaySend::Members("unpin store memory"), &StoreService::OnUnpin);
  table.Add<proto::HostChanged>(MaySend::Members("report a host change"),
                                &StoreService::OnHostChanged);
  table.Add<proto::OwnersKnown>(MaySend::Members("tell who owns what"),
                                &StoreService::OnOwnersKnown);
  return table;
}

Status StoreService::OnOwnersKnown(proto::OwnersKnown known, proto::Incoming&) {
  ATOLL_RETURN_IF_ERROR(owners_.Learn(known));
  if (known.table) directory_.ClientTableHeard(known.alive_clients);
  for (uint64_t client : known.gone_clients) {
    if (auto collected = directory_.Left(client)) PublishCollected(*collected);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------
// Handlers.

Status StoreService::OnStoreHello(proto::StoreHello, proto::Incoming& in) {
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

Status StoreService::OnGet(proto::GetObject req, proto::Incoming& in) {
  ATOLL_RETURN_IF_ERROR(CheckObjectOwner(in, req.object_id, "read"));
  if (req.pin && !in.sender.member()) {
    return PermissionDenied("read " + ShardName(req.object_id, req.shard) +
                            " pinned: only the cluster's members (executors) pin store memory");
  }
  auto found = directory_.Find(req.object_id, req.shard);
  if (found.ok() && (*found)->sealed) {
    AnswerSealed(ReplyToOf(in), **found, req.inline_data, req.pin);
    return Status::Ok();
  }
  if (req.timeout_ms == 0) {
    if (!found.ok()) return found.status();
    return NotFound(ShardName(req.object_id, req.shard) + " is not ready (created, not sealed)");
  }
  ArmDeadlineTimer(waiting_reads_.Add(req.object_id, req.shard, ReplyToOf(in), req.inline_data,
                                      req.timeout_ms, clock_.Now(), req.pin));
  return Status::Ok();
}

Status StoreService::OnRelease(proto::ReleaseObject req, proto::Incoming& in) {
  // A release its owner sent just before leaving can come after the RM's notice that it
  // left (another socket): its holds go with it anyway, so the release is carried out.
  if (Status owner = CheckObjectOwner(in, req.object_id, "release");
      !owner.ok() && owner.code() != Code::kCancelled) {
    return owner;
  }
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
  events_.Publish(topics::kObjectFreed, {{"object", object}, {"reason", std::string("released")}});
}

void StoreService::FreeIfReleased(uint64_t object) {
  if (!directory_.FreeIfReleased(object)) return;
  PublishFreed(object);
  RetryPending();
}

Status StoreService::OnHeartbeat(proto::Heartbeat req, proto::Incoming& in) {
  if (req.role == proto::Heartbeat::kExecutor) return Status::Ok();  // not tracked here
  ATOLL_ASSIGN_OR_RETURN(const uint64_t client, proto::HeartbeatClientId(req));
  ATOLL_RETURN_IF_ERROR(owners_.CheckClient(in.sender, client, "heartbeat"));
  directory_.Heartbeat(client);
  return Status::Ok();
}

Status StoreService::OnGoodbye(proto::Goodbye req, proto::Incoming& in) {
  ATOLL_RETURN_IF_ERROR(owners_.CheckGoodbye(in.sender, req.client_id));
  const Collected collected = directory_.Goodbye(req.client_id);
  Send(ReplyToOf(in), proto::Ok{});
  PublishCollected(collected);
  return Status::Ok();
}

Status StoreService::OnHostChanged(proto::HostChanged req, proto::Incoming&) {
  if (!req.lost || req.host != options_.host) return Status::Ok();  // not a reply: no answer
  const Status error = Unavailable(req.reason);
  std::vector<std::pair<uint64_t, uint32_t>> failed;
  // Reservations still queued for the lost executor: recorded failed, so readers get why.
  for (const RoomQueue::Pending& p : room_queue_.TakeAll()) {
    const auto& r = p.request;
    if (directory_.Reject(r.object_id, r.shard, r.owner_client, r.dtype, r.shape, error).ok()) {
      failed.emplace_back(r.object_id, r.shard);
    }
  }
  for (const auto& key : directory_.FailUnsealedDeviceShards(error)) failed.push_back(key);
  // Only this host's executor pins reads: it will not give its leases back.
  std::vector<Directory::Block> pins;
  for (const auto& [lease, block] : std::exchange(leases_, {})) pins.push_back(block);
  UnpinAll(pins);
  for (const auto& [object, shard] : failed) {
    WakeWaiters(object, shard);
    FreeIfReleased(object);
  }
  events_.Publish(topics::kStoreExecutorLost, {{"host", options_.host},
                                               {"shards_failed", uint64_t{failed.size()}},
                                               {"reason", req.reason}});
  return Status::Ok();
}

Status StoreService::OnStats(proto::GetStoreStats, proto::Incoming& in) {
  const DirectoryStats stats = directory_.Stats();
  Send(ReplyToOf(in), proto::StoreStats{stats.objects, stats.bytes_in_use, stats.arena_bytes,
                                        stats.objects_per_owner, stats.device_bytes_in_use,
                                        stats.device_bytes, stats.tombstones_per_owner});
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------
// Waiting gets and collection.

void StoreService::AnswerSealed(const ReplyTo& to, const ShardInfo& info, bool inline_data,
                                bool pin) {
  if (!info.error.ok()) {
    SendError(to, info.error);
    return;
  }
  net::Frames data;
  if (inline_data) data.emplace_back(arena_.data() + info.offset, info.nbytes);
  uint64_t lease = 0;
  if (pin && info.allocated) {
    lease = next_lease_++;
    leases_.emplace(lease, directory_.Pin(info));
  }
  Send(to,
       proto::GetObjectReply{info.dtype, info.shape, info.offset, info.nbytes, instance_, lease,
                             info.version},
       std::move(data));
}

Status StoreService::OnUnpin(proto::UnpinObjects req, proto::Incoming&) {
  if (req.instance != instance_) return Status::Ok();  // an earlier store's: gone with it
  std::vector<Directory::Block> pins;
  for (uint64_t lease : req.leases) {
    if (auto it = leases_.find(lease); it != leases_.end()) {
      pins.push_back(it->second);
      leases_.erase(it);
    }
  }
  UnpinAll(pins);
  return Status::Ok();
}

void StoreService::WakeWaiters(uint64_t object, uint32_t shard) {
  if (!waiting_reads_.Waits(object, shard)) return;
  auto found = directory_.Find(object, shard);
  if (!found.ok() || !(*found)->sealed) return;
  for (const WaitingReads::Read& read : waiting_reads_.TakeShard(object, shard)) {
    AnswerSealed(read.to, **found, read.inline_data, read.pin);
  }
}

void StoreService::CancelWaiters(uint64_t object, const std::string& why) {
  for (const WaitingReads::Taken& taken : waiting_reads_.TakeObject(object)) {
    SendError(taken.read.to, Cancelled(ShardName(object, taken.shard) + " " + why));
  }
}

void StoreService::ArmDeadlineTimer(std::optional<TimePoint> at) {
  if (at) deadline_timer_.ArmAt(*at);
}

void StoreService::ExpireWaiters() {
  WaitingReads::Expiry expiry = waiting_reads_.Expire(clock_.Now());
  for (const WaitingReads::Taken& late : expiry.expired) {
    SendError(late.read.to,
              DeadlineExceeded(ShardName(late.object, late.shard) + " was not sealed within " +
                               std::to_string(late.read.timeout_ms) + " ms" +
                               room_queue_.DescribeWait(late.object, late.shard)));
  }
  ArmDeadlineTimer(expiry.arm_at);
}

void StoreService::ExpireClients() {
  if (client_stall_guard_.MayJudge(std::chrono::steady_clock::now())) {
    for (const Collected& collected : directory_.Expire()) PublishCollected(collected);
  }
  // Memory in use, for live views (`atoll top`, `atoll dashboard`): one event per period.
  const DirectoryStats stats = directory_.Stats();
  events_.Publish(topics::kStoreStats, {{"host", options_.host},
                                        {"objects", stats.objects},
                                        {"bytes_in_use", stats.bytes_in_use},
                                        {"arena_bytes", stats.arena_bytes}});
  events_.Publish(topics::kNetStats, net::SentCountFields());
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
  events_.Publish(topics::kObjectCollected, {{"client", collected.client},
                                             {"count", uint64_t{collected.objects.size()}},
                                             {"reason", reason}});
  for (uint64_t object : collected.objects) {
    CancelWaiters(object, "was collected (client " + std::to_string(collected.client) + ": " +
                              reason + ") before it was sealed");
  }
  RetryPending();
}

}  // namespace atl::store
