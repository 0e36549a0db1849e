#include "services/executor/store_link.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/net/transport.h"

namespace atl::executor {

namespace {

// How long the object store waits for an argument to appear before it answers.
constexpr uint32_t kArgumentWaitMs = 30000;

}  // namespace

Status SocketStoreRequests::Send(uint64_t request_id, const proto::CreateObject& request) {
  return net::Send(socket_, nullptr, request_id, request);
}

Status SocketStoreRequests::Send(uint64_t request_id, const proto::GetObject& request) {
  return net::Send(socket_, nullptr, request_id, request);
}

Status SocketStoreRequests::Send(uint64_t request_id, const proto::SealObject& request) {
  return net::Send(socket_, nullptr, request_id, request);
}

Status SocketStoreRequests::Send(uint64_t request_id, const proto::PutObject& request,
                                 const Tensor& value) {
  net::Frames data;
  data.emplace_back(value.data(), value.nbytes());
  return net::Send(socket_, nullptr, request_id, request, std::move(data));
}

Status SocketStoreRequests::Send(uint64_t request_id, const proto::UnpinObjects& request) {
  return net::Send(socket_, nullptr, request_id, request);
}

StoreLink::StoreLink(StoreRequests& requests, ItemSink& items, ObjectReaders& readers,
                     ShmRegion& arena, Hooks hooks, RunAheadLimits run_ahead, size_t max_in_flight)
    : send_(requests),
      items_(items),
      readers_(readers),
      arena_(arena),
      hooks_(std::move(hooks)),
      run_ahead_(run_ahead),
      max_in_flight_(std::max<size_t>(max_in_flight, 1)) {}

void StoreLink::Attach(uint64_t instance) {
  instance_ = instance;
  detached_ = Status::Ok();
  if (Status mapped = views_.Attach(arena_.name(), instance); !mapped.ok()) {
    hooks_.on_error(mapped.WithContext("arguments are copied: map the arena read-only"));
  }
}

void StoreLink::Detach(const Status& why) {
  detached_ = why;
  views_.Detach();
  auto fail = [&](const Request& request) {
    if (request.kind == Request::kGetInput) {
      items_.Fail(request.item, why.WithContext("read argument"));
    } else if (request.kind == Request::kCreate) {
      AnswerWaiting(*request.write, why.WithContext("reserve output"));
    } else if (request.kind == Request::kPut) {
      AnswerWaiting(*request.write, why.WithContext("put output"));
    }
  };
  for (auto& [id, request] : std::exchange(requests_, {})) fail(request);
  for (Lane& lane : lanes_) {
    lane.in_flight = 0;
    for (const Request& request : std::exchange(lane.queued, {})) fail(request);
  }
  for (auto& [key, write] : std::exchange(writes_, {})) {
    AnswerWaiting(*write, why.WithContext("put output"));  // a shard still running for it
    FeedLocalReaders(*write, why);
  }
}

Status StoreLink::CheckInstance(uint64_t instance) {
  if (instance == instance_) return Status::Ok();
  if (hooks_.on_restarted) hooks_.on_restarted();
  return Unavailable("the object store restarted since this executor mapped its arena");
}

StoreLink::Lane& StoreLink::LaneOf(const Request& request) {
  const bool waits_for_memory = request.kind == Request::kCreate || request.kind == Request::kPut;
  return lanes_[waits_for_memory ? 0 : 1];
}

Status StoreLink::Send(Request request) {
  Lane& lane = LaneOf(request);
  if (lane.in_flight >= max_in_flight_ || !lane.queued.empty()) {
    lane.queued.push_back(std::move(request));
    return Status::Ok();
  }
  const uint64_t id = next_request_++;
  ATOLL_RETURN_IF_ERROR(Transmit(id, request));
  lane.in_flight++;
  requests_.emplace(id, std::move(request));
  return Status::Ok();
}

Status StoreLink::Transmit(uint64_t id, const Request& request) {
  switch (request.kind) {
    case Request::kCreate:
      return send_.Send(id, request.write->create);
    case Request::kGetInput: {
      const proto::InputSource& src = request.item->entry.inputs[request.input];
      return send_.Send(id, proto::GetObject{src.object_id, src.shard, kArgumentWaitMs, false,
                                             /*pin=*/views_.available()});
    }
    case Request::kSeal: {
      const Write& write = *request.write;
      proto::SealObject seal{write.create.object_id, write.create.shard, 0, ""};
      if (!write.failure.ok()) {
        seal.error_code = static_cast<int32_t>(write.failure.code());
        seal.error = write.failure.message();
      }
      return send_.Send(id, seal);
    }
    case Request::kPut: {
      const Tensor& value = *request.write->value;
      const proto::CreateObject& c = request.write->create;
      return send_.Send(id,
                        proto::PutObject{c.object_id, c.shard, c.owner_client, value.dtype(),
                                         value.shape(), c.device},
                        value);
    }
  }
  return Internal("unknown store request kind");
}

void StoreLink::SendQueued() {
  for (Lane& lane : lanes_) {
    while (lane.in_flight < max_in_flight_ && !lane.queued.empty()) {
      Request request = std::move(lane.queued.front());
      lane.queued.pop_front();
      const uint64_t id = next_request_++;
      if (Status sent = Transmit(id, request); !sent.ok()) {
        Answer(request, nullptr, sent);  // as if the store had refused it
        continue;
      }
      lane.in_flight++;
      requests_.emplace(id, std::move(request));
    }
  }
}

Result<bool> StoreLink::ReserveOutput(proto::CreateObject create, bool deferred,
                                      const std::shared_ptr<WorkItem>& item) {
  ATOLL_RETURN_IF_ERROR(detached_);
  auto write = std::make_shared<Write>();
  write->create = std::move(create);
  write->deferred = deferred;
  writes_[{write->create.object_id, write->create.shard}] = write;
  if (deferred) return false;
  // A negative dimension (data-dependent) never gets here; the store refuses the absurd.
  const uint64_t nbytes =
      static_cast<uint64_t>(NumElements(write->create.shape)) * DTypeSize(write->create.dtype);
  if (nbytes > 0 && nbytes <= run_ahead_.output_bytes &&
      ahead_bytes_ + nbytes <= run_ahead_.budget_bytes) {
    // Reserved with its value (Put), or, when the shard fails, like a deferred output.
    write->deferred = true;
    write->ahead_bytes = nbytes;
    ahead_bytes_ += nbytes;
    write->waiting = item;
    return true;
  }
  ATOLL_RETURN_IF_ERROR(Send({Request::kCreate, write, nullptr, 0}));
  write->waiting = item;
  item->reservations_missing++;
  return false;
}

void StoreLink::ReadInput(const std::shared_ptr<WorkItem>& item, uint32_t input) {
  if (!detached_.ok()) {
    items_.Fail(item, detached_.WithContext("read argument"));
    return;
  }
  const proto::InputSource& src = item->entry.inputs[input];
  if (auto w = writes_.find({src.object_id, src.shard}); w != writes_.end()) {
    // Written here, not sealed yet: the value is taken from the write, now or once it exists
    // (a deferred output's value exists before its space).
    Write& write = *w->second;
    if (write.value) {
      items_.Deliver(item, input, *write.value);
    } else if (!write.failure.ok()) {
      items_.Fail(item, write.failure);
    } else {
      readers_.Await({src.object_id, src.shard}, item, input);
    }
    return;
  }
  Status sent = Send({Request::kGetInput, nullptr, item, input});
  if (!sent.ok()) items_.Fail(item, sent.WithContext("read argument"));
}

void StoreLink::WriteOutput(uint64_t object_id, uint32_t shard, const Result<Tensor>& value) {
  auto it = writes_.find({object_id, shard});
  if (it == writes_.end()) return;
  std::shared_ptr<Write> write = it->second;
  if (value.ok()) {
    write->value = *value;
  } else {
    write->failure = value.status();
  }
  FeedLocalReaders(*write, write->failure);
  if (write->ahead_bytes > 0 && write->value) {
    writes_.erase(it);
    Put(write);
    return;
  }
  if (!write->deferred) {
    Complete(write);
    return;
  }
  // Now the shape is known; a failed shard's output is sealed empty with its error.
  write->deferred = false;
  if (write->value) {
    write->create.shape = write->value->shape();
  } else {
    for (int64_t& d : write->create.shape) d = std::max<int64_t>(d, 0);
  }
  Status sent = Send({Request::kCreate, write, nullptr, 0});
  if (!sent.ok()) {
    writes_.erase(it);
    hooks_.on_error(sent.WithContext("reserve output"));
  }
}

void StoreLink::OnReply(const proto::Incoming& reply) {
  auto it = requests_.find(reply.header.request_id());
  if (it == requests_.end()) {
    // A read answered after its request was given up (the store was detached meanwhile).
    if (reply.header.kind() != proto::Kind::kGetObjectReply) return;
    if (auto got = reply.header.As<proto::GetObjectReply>(); got.ok() && got->lease != 0) {
      Unpin(got->instance, got->lease);
    }
    return;
  }
  Request request = std::move(it->second);
  requests_.erase(it);
  LaneOf(request).in_flight--;
  Status error;
  if (reply.header.kind() == proto::Kind::kError) {
    auto err = reply.header.As<proto::Error>();
    error = err.ok() ? proto::FromError(*err) : err.status();
  }
  Answer(request, &reply, std::move(error));
  SendQueued();
}

void StoreLink::Answer(const Request& request, const proto::Incoming* reply, Status error) {
  switch (request.kind) {
    case Request::kCreate:
      OnCreateReply(request, reply, std::move(error));
      break;
    case Request::kGetInput:
      OnGetReply(request, reply, error);
      break;
    case Request::kSeal:
      if (!error.ok()) hooks_.on_error(error.WithContext("seal"));
      break;
    case Request::kPut:
      AnswerWaiting(*request.write, error.WithContext("put output"));
      if (!error.ok()) hooks_.on_error(error.WithContext("put output"));
      break;
  }
}

void StoreLink::OnCreateReply(const Request& request, const proto::Incoming* reply, Status error) {
  Result<proto::CreateObjectReply> created = error;
  if (error.ok()) created = reply->header.As<proto::CreateObjectReply>();
  if (error.ok()) error = created.ok() ? CheckInstance(created->instance) : created.status();
  Write& write = *request.write;
  AnswerWaiting(write, error.WithContext("reserve output"));
  if (!error.ok()) {
    // Nothing to seal: the object store refused the space (one that can never fit is
    // recorded there as failed, so that its readers get the error).
    FeedLocalReaders(write, error.WithContext("reserve output"));
    writes_.erase({write.create.object_id, write.create.shard});
    hooks_.on_error(error.WithContext("reserve output"));
    return;
  }
  write.offset = created->offset;
  Complete(request.write);
}

void StoreLink::OnGetReply(const Request& request, const proto::Incoming* reply,
                           const Status& error) {
  Result<Tensor> value = error;
  if (error.ok()) {
    auto got = reply->header.As<proto::GetObjectReply>();
    Status same = got.ok() ? CheckInstance(got->instance) : got.status();
    value = same.ok() ? ReadArena(*got) : Result<Tensor>(same);
    if (!same.ok() && got.ok() && got->lease != 0) Unpin(got->instance, got->lease);
  }
  if (value.ok()) {
    items_.Deliver(request.item, request.input, std::move(value).value());
  } else {
    items_.Fail(request.item, value.status().WithContext("read argument"));
  }
}

Result<Tensor> StoreLink::ReadArena(const proto::GetObjectReply& reply) {
  if (reply.lease != 0) {
    // Pinned: read in place. A view that cannot be made (the read-only mapping is of another
    // instance) gives the lease back, and the bytes are copied.
    Result<Tensor> view = views_.View(reply);
    if (view.ok() || view.status().code() != Code::kFailedPrecondition) return view;
    Unpin(reply.instance, reply.lease);
  }
  ATOLL_ASSIGN_OR_RETURN(auto bytes, std::as_const(arena_).Slice(reply.offset, reply.nbytes));
  return Tensor::FromBytes(reply.dtype, reply.shape,
                           std::vector<std::byte>(bytes.begin(), bytes.end()));
}

void StoreLink::Unpin(uint64_t instance, uint64_t lease) {
  // Not answered: a lost one leaves the block pinned until that store's process ends.
  (void)send_.Send(next_request_++, proto::UnpinObjects{instance, {lease}});
}

void StoreLink::SendUnpins() {
  std::vector<uint64_t> leases = views_.TakeReleased();
  if (leases.empty() || !attached()) return;
  if (Status sent = send_.Send(next_request_++, proto::UnpinObjects{instance_, std::move(leases)});
      !sent.ok()) {
    hooks_.on_error(sent.WithContext("give back the pins of arguments read in place"));
  }
}

void StoreLink::Put(const std::shared_ptr<Write>& write) {
  Status sent = Send({Request::kPut, write, nullptr, 0});
  if (!sent.ok()) {
    AnswerWaiting(*write, sent.WithContext("put output"));
    hooks_.on_error(sent.WithContext("put output"));
  }
}

void StoreLink::AnswerWaiting(Write& write, const Status& answer) {
  std::shared_ptr<WorkItem> item = std::exchange(write.waiting, nullptr);
  if (!item) return;
  if (write.ahead_bytes > 0) {
    ahead_bytes_ -= std::exchange(write.ahead_bytes, 0);
    if (hooks_.on_ahead_answered) hooks_.on_ahead_answered(item, answer);
  } else if (answer.ok()) {
    items_.Reserved(item);
  } else {
    items_.Fail(item, answer);
  }
}

void StoreLink::FeedLocalReaders(Write& write, const Status& failure) {
  const ObjectReaders::ObjectShard object{write.create.object_id, write.create.shard};
  if (failure.ok() && write.value) {
    readers_.Deliver(object, *write.value);
  } else {
    readers_.Fail(object, failure.ok() ? Internal("no value") : failure);
  }
}

void StoreLink::Complete(const std::shared_ptr<Write>& write) {
  if (write->finished || !write->offset) return;
  if (!write->value && write->failure.ok()) return;
  write->finished = true;
  writes_.erase({write->create.object_id, write->create.shard});
  if (write->value) {
    auto span = arena_.Slice(*write->offset, write->value->nbytes());
    if (!span.ok()) {
      write->failure = span.status();
    } else if (write->value->nbytes() > 0) {  // an empty tensor's data() may be null
      std::memcpy(span->data(), write->value->data(), write->value->nbytes());
    }
    write->value.reset();  // in the arena now; the seal may wait for a free request slot
  }
  Status sent = Send({Request::kSeal, write, nullptr, 0});
  if (!sent.ok()) hooks_.on_error(sent);
}

}  // namespace atl::executor
