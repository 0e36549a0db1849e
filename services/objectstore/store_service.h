// StoreService: the atoll-objectstore process's one event loop. It owns the host's
// shared-memory arena, the object Directory, a ROUTER socket that executors and clients talk
// to (see the object-store section of common/proto/store_messages.h) and an event publisher.
//
// Replies. Every request gets exactly one reply, except Heartbeat and UnpinObjects (none when
// well formed).
// A request that cannot be parsed or is refused gets an Error reply carrying its request id
// (0 when the header itself is unreadable); the service logs it, publishes "error.store" and
// goes on serving. A message without even a routing id is logged and dropped.
//
// Waiting Gets. A GetObject for a shard that is not sealed yet, with timeout_ms > 0, is
// answered when the shard is sealed (the reply, or the producer's error), when its object is
// freed (Cancelled), or after timeout_ms (DeadlineExceeded), whichever comes first. A
// one-shot timer sleeps until the earliest deadline: an idle store does not tick. The rules
// are WaitingReads' (waiting_reads.h); this class answers what it returns.
//
// Backpressure. A CreateObject for a device's memory that does not fit now is queued and
// answered once enough is freed (a release or a collection), strictly in arrival order per
// device, so that a small request never overtakes a large one: the executor sends them in
// the island scheduler's order. Each queued request is announced as "object.waiting". One
// that can never fit is refused at once, and the shard is recorded as failed with that
// error, so that its readers fail at once too. Host-arena requests never wait. The rules are
// RoomQueue's (room_queue.h); the handlers that use it are in store_writes.cc.
//
// Quotas. A CreateObject or PutObject that would take its owner over its per-store quota
// (StoreOptions::quota_objects, quota_bytes; Directory, "Quotas") is refused with
// ResourceExhausted, a device reservation at once (not queued) and recorded as failed like
// one that can never fit.
//
// Releases. A release of an object still being written frees it once its shards are sealed;
// one of an object not created yet is remembered until it is (Directory, "Releases"), so
// that a run dropped or cancelled before its outputs exist leaks nothing and reports no
// error. Either way, Gets waiting on it are answered Cancelled at once.
//
// Collection. Every heartbeat period the directory expires clients silent for longer than
// heartbeat * liveness and frees their objects ("object.collected"), and the store publishes
// "store.stats" {host, objects, bytes_in_use, arena_bytes}: the arena's memory in use.
//
// Security. The sender of a request is its authenticated key (proto::Peer), never a field
// of the request. Requests are dispatched from one table (MakeRequestTable: each kind, who
// may send it, its handler). Only the cluster's members (executors) reserve, seal and report; a
// client may put, read and release only its own objects (an object's id names its client) and
// heartbeat or say goodbye only as itself. An object whose owner the RM does not know as a
// live client is never created (OwnerCache asks the RM once per client), so nothing is
// left that no collection would free. Refusals are PermissionDenied or NotFound.
//
// Checkpoints (store_checkpoints.cc). SaveShards writes the owner's sealed shards held here
// (and values the client sends) as .npy files below the checkpoint root, CommitCheckpoint
// writes the index last, ReadCheckpointIndex reads it, LoadShards reads files into new
// objects of the owner's in the arena, all or none. Every path is confined to the root
// (CheckpointDir) below the owner's key name; see docs/design-notes.md, "Checkpoints".
// The files are read and written on a worker thread (CheckpointWorker), never the loop's:
// a save's shards stay pinned (Directory, "Pins") until their files are written, a load's
// new shards are reserved unsealed and sealed once filled, and the reply (or the error, as
// any other) goes out then.
//
// Pinned reads. The host's executor reads its arguments in place (GetObject::pin): the
// reply's lease pins the shard's block (Directory, "Pins") until the executor drops it
// (UnpinObjects), so that a release meanwhile never hands that memory to another object. The
// leases of an executor the RM declares lost are dropped with it.
//
// Liveness. The store heartbeats the RM every heartbeat period (when it has an RM), so that
// the RM can declare it lost when it falls silent and stop placing work on its host.
//
// Threading: everything runs on the thread that calls Run(), except checkpoint file work
// (above); Stop() may be called from any thread, and SIGINT/SIGTERM (after
// InstallShutdownSignals) also make Run() return, after the checkpoint worker stopped.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include <zmq.hpp>

#include "atoll/status.h"
#include "common/base/shm_arena.h"
#include "common/net/event_loop.h"
#include "common/net/events.h"
#include "common/net/rejection_log.h"
#include "common/net/request_table.h"
#include "common/net/transport.h"
#include "common/proto/codec.h"
#include "common/service/owner_cache.h"
#include "common/service/stall_guard.h"
#include "services/objectstore/checkpoint_worker.h"
#include "services/objectstore/clock.h"
#include "services/objectstore/deadline_timer.h"
#include "services/objectstore/directory.h"
#include "services/objectstore/reply_to.h"
#include "services/objectstore/room_queue.h"
#include "services/objectstore/waiting_reads.h"

namespace atl::store {

struct StoreOptions {
  std::string host;                                 // this host's name, for names and events
  std::string bind_endpoint = "tcp://127.0.0.1:*";  // a port of * or 0 picks a free one
  uint64_t arena_bytes = 256ull << 20;
  std::vector<uint64_t> device_bytes;        // each local device's memory
  std::string arena_name;                    // empty: ShmRegion::MakeName(host)
  std::chrono::milliseconds heartbeat{500};  // expiry check period; > 0
  uint32_t liveness = 4;                     // missed heartbeats before collection; > 0
  std::string events_in;                     // empty: publish nothing
  std::string rm_endpoint;                   // empty: heartbeat no RM
  // What each client may hold in this store ([quotas] store_objects, store_bytes); 0:
  // unlimited.
  uint64_t quota_objects = 0;
  uint64_t quota_bytes = 0;
  // Where checkpoints are read and written (an absolute path; made on the first save). A
  // client's paths are relative to <root>/<its key's name> (to <root> in plain text). Empty:
  // checkpoint requests are refused (FailedPrecondition).
  std::string checkpoint_root;
};

class StoreService {
 public:
  // Creates the arena, binds the socket and connects the publisher. Unavailable when the
  // arena or the socket cannot be made, InvalidArgument for bad options.
  [[nodiscard]] static Result<std::unique_ptr<StoreService>> Create(zmq::context_t& context,
                                                                    StoreOptions options);

  const std::string& endpoint() const { return endpoint_; }  // the bound address
  const std::string& arena_name() const { return arena_.name(); }
  uint64_t instance() const { return instance_; }

  // Serves until Stop() or a shutdown signal.
  void Run();
  void Stop() { loop_.Stop(); }

 private:
  StoreService(zmq::context_t& context, StoreOptions options, ShmRegion arena, DeadlineTimer timer);

  void OnReadable();
  // The requests it serves, one row each (who may send it, its handler): requests_. Each
  // handler either replies itself and returns OK, or returns the error to reply with.
  static net::RequestTable<StoreService> MakeRequestTable();
  Status OnStoreHello(proto::StoreHello req, proto::Incoming& in);
  // Writes (store_writes.cc).
  Status OnCreate(proto::CreateObject req, proto::Incoming& in);
  Status OnSeal(proto::SealObject req, proto::Incoming& in);
  Status OnPut(proto::PutObject req, proto::Incoming& in);
  Status OnGet(proto::GetObject req, proto::Incoming& in);
  Status OnUnpin(proto::UnpinObjects req, proto::Incoming& in);  // not answered
  Status OnRelease(proto::ReleaseObject req, proto::Incoming& in);
  Status OnHeartbeat(proto::Heartbeat req, proto::Incoming& in);
  Status OnGoodbye(proto::Goodbye req, proto::Incoming& in);
  Status OnStats(proto::GetStoreStats req, proto::Incoming& in);
  Status OnOwnersKnown(proto::OwnersKnown known, proto::Incoming& in);  // the RM's: no reply
  // Checkpoints (store_checkpoints.cc). Each posts its file work to checkpoint_worker_ and
  // replies when it is done.
  struct SaveJob;
  struct LoadJob;
  Status OnSaveShards(proto::SaveShards req, proto::Incoming& in);  // takes the value frames
  Status OnCommitCheckpoint(proto::CommitCheckpoint req, proto::Incoming& in);
  Status OnReadCheckpointIndex(proto::ReadCheckpointIndex req, proto::Incoming& in);
  Status OnLoadShards(proto::LoadShards req, proto::Incoming& in);
  void FinishSave(SaveJob& job, const Result<proto::SaveShardsReply>& written);
  void FinishLoad(LoadJob& job, const Status& read);
  // Undoes the first `reserved` shards of a load that failed with `error`: sealed with it
  // (their readers told), released, and `pins` dropped.
  void UndoLoad(const proto::LoadShards& req, size_t reserved,
                const std::vector<Directory::Block>& pins, const Status& error);
  void UnpinAll(const std::vector<Directory::Block>& pins);
  // Starts checkpoint_worker_, and polls its completions, unless it runs already.
  Status StartCheckpointWorker();
  // Refuses a request answered after its handler returned, as ServeRequests refuses one.
  void RejectLater(const ReplyTo& to, proto::Kind kind, const Status& error);
  // Where `client`'s checkpoints are: the checkpoint root, below the key it connected with.
  // PermissionDenied unless the sender may act for `client`; NotFound when `client` is not
  // connected; FailedPrecondition when this store has no root.
  Result<std::string> CheckpointRootOf(const proto::Incoming& in, uint64_t client,
                                       std::string_view action);
  // PermissionDenied unless the sender is a member or the client whose `object` it is.
  Status CheckObjectOwner(const proto::Incoming& in, uint64_t object, std::string_view action);
  // NotFound unless `owner_client` is a live client; PermissionDenied unless the sender is a
  // member, or that client writing an object of its own.
  Status CheckNewObject(const proto::Incoming& in, uint64_t object, uint64_t owner_client);
  // The RM says this host's executor was lost: what it reserved and never wrote fails.
  Status OnHostChanged(proto::HostChanged req, proto::Incoming& in);

  // Answers a Get for a shard that is sealed: the reply (with the bytes when `inline_data`,
  // leasing its memory when `pin`), or the error it was sealed with.
  void AnswerSealed(const ReplyTo& to, const ShardInfo& info, bool inline_data, bool pin);
  // Answers the reads waiting for (object, shard) if it is sealed now.
  void WakeWaiters(uint64_t object, uint32_t shard);
  // Answers every read waiting for a shard of `object` Cancelled: "<shard> <why>".
  void CancelWaiters(uint64_t object, const std::string& why);
  // Arms the one-shot deadline timer for `at`, when WaitingReads says it must move.
  void ArmDeadlineTimer(std::optional<TimePoint> at);
  // The deadline timer fired: answers the reads whose deadline has passed.
  void ExpireWaiters();
  void ExpireClients();
  void HeartbeatRm();
  // The RM's answers: none to a heartbeat it accepts; an Error is logged (TakeErrors).
  void OnRm();
  void PublishCollected(const Collected& collected);
  void PublishFreed(uint64_t object);
  // Frees `object` if it was released and its last shard was just sealed (its waiters
  // answered first), then retries what waits for memory.
  void FreeIfReleased(uint64_t object);

  // Writes and the queue for room (store_writes.cc).
  // A shard put whole (created and sealed at once): its waiters answered, announced, and
  // freed if it was released before it existed.
  void AnnouncePut(uint64_t object, uint32_t shard, uint64_t owner, uint64_t nbytes);
  // Makes room for `req` (a CreateObject, or a put into a device's memory with its bytes in
  // `put`) now, or queues it behind earlier ones until a free makes room (backpressure:
  // RoomQueue::Admit), or refuses it for good. A put's bytes are copied only when it waits.
  Status Reserve(const proto::Incoming& in, proto::CreateObject req,
                 std::optional<std::span<const std::byte>> put);
  // Answers a request whose space was reserved: a CreateObject with where it lies; a put
  // once its bytes are written there and sealed.
  void AnswerCreated(const ReplyTo& to, const proto::CreateObject& req, const ShardInfo& info,
                     std::optional<std::span<const std::byte>> put);
  // Refuses a request for good with `error` (it can never fit, or is over its owner's
  // quota), recording the shard as failed with it so that its readers fail at once: the
  // executor that asked fails the shard, and the client's Wait gets `error`. Returns the
  // error to reply with.
  Status Refuse(const proto::CreateObject& req, const Status& error);
  // After a free: creates what now fits at the head of each device's queue, and answers it.
  void RetryPending();
  void AnswerReady(RoomQueue::Ready ready);
  // Refuses the queued requests of a client whose objects were collected.
  void DropPending(uint64_t client, const std::string& why);

  template <typename T>
  void Send(const ReplyTo& to, const T& body, net::Frames data = {}) {
    const Status sent = net::Send(socket_, &to.routing_id, to.request_id, body, std::move(data));
    if (!sent.ok()) LogUnsent(T::kKind, to.request_id, sent);
  }
  static void LogUnsent(proto::Kind kind, uint64_t request_id, const Status& sent);
  void SendError(const ReplyTo& to, const Status& status);
  static ReplyTo ReplyToOf(const proto::Incoming& in);

  StoreOptions options_;
  ShmRegion arena_;
  SteadyClock clock_;
  Directory directory_;
  StallGuard client_stall_guard_;  // whether ExpireClients may collect silent clients now
  zmq::socket_t socket_;
  std::string endpoint_;
  std::unique_ptr<net::Requester> rm_;  // null without an RM
  OwnerCache owners_{nullptr, {}};
  const uint64_t instance_;  // random, per process (StoreHelloReply)
  EventPublisher events_;
  net::RejectionLog rejected_;  // requests refused, logged rate-limited per peer
  const net::RequestTable<StoreService> requests_ = MakeRequestTable();
  EventLoop loop_;
  WaitingReads waiting_reads_;                   // Gets for shards not sealed yet
  RoomQueue room_queue_;                         // device requests waiting for room (backpressure)
  std::map<uint64_t, Directory::Block> leases_;  // pinned reads' memory, by lease
  uint64_t next_lease_ = 1;
  DeadlineTimer deadline_timer_;  // fires at the earliest waiting read's deadline
  // Declared last: destroyed (stopped and joined) first, while the arena it reads and
  // writes is still mapped.
  CheckpointWorker checkpoint_worker_;
};

}  // namespace atl::store
