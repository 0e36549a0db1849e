// StoreService's writes: reservations (CreateObject), seals, puts, and the queue for room in
// a device's memory (RoomQueue) that reservations and executors' puts wait in. See
// store_service.h, "Backpressure". Runs on the store's event loop, as the rest.
#include <cstring>
#include <optional>
#include <span>
#include <string>

#include "common/net/event_topics.h"
#include "common/proto/ids.h"
#include "services/objectstore/store_service.h"

namespace atl::store {

Status StoreService::OnCreate(proto::CreateObject req, proto::Incoming& in) {
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
  ATOLL_ASSIGN_OR_RETURN(RoomQueue::Admitted admitted, room_queue_.Admit(ReplyToOf(in), req, put));
  switch (admitted.outcome) {
    case RoomQueue::Outcome::kCreated:
      AnswerCreated(admitted.to, req, admitted.created, put);
      return Status::Ok();
    case RoomQueue::Outcome::kRefused:
      return Refuse(req, admitted.refusal);
    case RoomQueue::Outcome::kQueued:
      break;
  }
  // Backpressure: the device is full now; the request waits for a free, behind earlier ones.
  const DirectoryStats stats = directory_.Stats();
  events_.Publish(topics::kObjectWaiting,
                  {{"object", req.object_id},
                   {"shard", uint64_t{req.shard}},
                   {"owner", req.owner_client},
                   {"host", options_.host},
                   {"device", int64_t{req.device}},
                   {"nbytes", admitted.nbytes},
                   {"device_bytes_in_use", stats.device_bytes_in_use[req.device]},
                   {"device_bytes", stats.device_bytes[req.device]},
                   {"queued", uint64_t{admitted.ahead}}});
  return Status::Ok();
}

Status StoreService::Refuse(const proto::CreateObject& req, const Status& error) {
  ATOLL_RETURN_IF_ERROR(
      directory_.Reject(req.object_id, req.shard, req.owner_client, req.dtype, req.shape, error));
  events_.Publish(
      topics::kObjectSealed,
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
  events_.Publish(topics::kObjectCreated, {{"object", req.object_id},
                                           {"shard", uint64_t{req.shard}},
                                           {"owner", req.owner_client},
                                           {"device", int64_t{req.device}},
                                           {"nbytes", info.nbytes}});
}

void StoreService::RetryPending() {
  while (std::optional<RoomQueue::Ready> ready = room_queue_.TakeReady()) {
    AnswerReady(std::move(*ready));
  }
}

void StoreService::AnswerReady(RoomQueue::Ready ready) {
  const RoomQueue::Pending& head = ready.pending;
  if (ready.created.ok()) {
    std::optional<std::span<const std::byte>> put;
    if (head.put) put.emplace(*head.put);
    AnswerCreated(head.to, head.request, *ready.created, put);
  } else if (ready.created.status().code() == Code::kResourceExhausted) {
    // Its owner's other reservations took the quota while it waited.
    SendError(head.to, Refuse(head.request, ready.created.status()));
  } else {
    SendError(head.to, ready.created.status());
  }
}

void StoreService::DropPending(uint64_t client, const std::string& why) {
  for (const RoomQueue::Pending& dropped : room_queue_.TakeClient(client)) {
    SendError(dropped.to, Cancelled(ShardName(dropped.request.object_id, dropped.request.shard) +
                                    " will not be created: " + why));
  }
}

Status StoreService::OnSeal(proto::SealObject req, proto::Incoming& in) {
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
  events_.Publish(topics::kObjectSealed, fields, sealed_us);
  FreeIfReleased(req.object_id);
  return Status::Ok();
}

Status StoreService::OnPut(proto::PutObject req, proto::Incoming& in) {
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
      topics::kObjectCreated,
      {{"object", object}, {"shard", uint64_t{shard}}, {"owner", owner}, {"nbytes", nbytes}},
      sealed_us);
  events_.Publish(topics::kObjectSealed, {{"object", object}, {"shard", uint64_t{shard}}},
                  sealed_us);
  FreeIfReleased(object);
}

}  // namespace atl::store
