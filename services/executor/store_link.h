// StoreLink: the executor's side of its conversation with the host's object store. It
// reserves space for output shards at admission (CreateObject), writes each finished
// output into its space in the shared-memory arena and seals it (SealObject), reads
// arguments (GetObject, then the bytes from the arena), and matches every reply to the
// request it answers. A shard on this host that reads an object still being written here
// (a chain of op-by-op calls) gets the value straight from the write, not through the store:
// it waits in ObjectReaders, where the device thread that runs the writer hands it over.
//
// An argument from the store is read in place (ArenaViews): the store pins its block for the
// run, which reads it through a read-only mapping and gives the lease back when done
// (SendUnpins); without that mapping it is copied out of the arena.
//
// A small output is not reserved ahead: its shard runs at once and the value goes to the
// store whole (PutObject, which waits there for room in the device's memory as a
// reservation would), so that a short computation pays for no store round trip before it
// starts and for one message after. RunAheadLimits bound the bytes sent so and not yet
// answered; beyond them a shard waits for its space as before.
//
// The store's replies to this executor queue in the store's ROUTER, which refuses (and so
// loses) a reply beyond its high-water mark, so the requests unanswered at once are
// bounded; the rest wait here, in order, in one of two lanes of `max_in_flight` each:
// reservations and puts, which the store may hold until memory is freed, and seals and
// reads, which it answers soon. A seal never waits behind reservations waiting for memory
// that only the sealed result's reader would free.
//
// Seams: requests leave through StoreRequests (a socket in the executor, a fake in tests),
// replies come in decoded through OnReply; inputs, grants and failures go to an ItemSink;
// the answers to reservations a shard ran ahead of, and errors nobody waits for (a refused
// reservation, a failed seal) go to the Hooks.
//
// Not thread-safe: the executor's loop owns it.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <zmq.hpp>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/base/shm_arena.h"
#include "common/proto/codec.h"
#include "services/executor/arena_views.h"
#include "services/executor/object_readers.h"
#include "services/executor/work_item.h"

namespace atl::executor {

// Sends one request to the object store; its reply must come back, with the same
// request id, through StoreLink::OnReply. Returns the error when it could not be sent.
class StoreRequests {
 public:
  virtual ~StoreRequests() = default;
  virtual Status Send(uint64_t request_id, const proto::CreateObject& request) = 0;
  virtual Status Send(uint64_t request_id, const proto::GetObject& request) = 0;
  virtual Status Send(uint64_t request_id, const proto::SealObject& request) = 0;
  // A PutObject, `value`'s bytes its data frame.
  virtual Status Send(uint64_t request_id, const proto::PutObject& request,
                      const Tensor& value) = 0;
  // Not answered (but for an Error, which no pending request matches).
  virtual Status Send(uint64_t request_id, const proto::UnpinObjects& request) = 0;
};

// StoreRequests over the executor's DEALER socket to the object store.
class SocketStoreRequests final : public StoreRequests {
 public:
  explicit SocketStoreRequests(zmq::socket_t& socket) : socket_(socket) {}
  Status Send(uint64_t request_id, const proto::CreateObject& request) override;
  Status Send(uint64_t request_id, const proto::GetObject& request) override;
  Status Send(uint64_t request_id, const proto::SealObject& request) override;
  Status Send(uint64_t request_id, const proto::PutObject& request, const Tensor& value) override;
  Status Send(uint64_t request_id, const proto::UnpinObjects& request) override;

 private:
  zmq::socket_t& socket_;
};

// Which outputs are put whole instead of reserved ahead: each at most `output_bytes`, while
// the puts (and outputs of shards running for them) the store has not answered hold at
// most `budget_bytes` in all.
struct RunAheadLimits {
  uint64_t output_bytes = uint64_t{64} << 10;
  uint64_t budget_bytes = uint64_t{4} << 20;
};

class StoreLink {
 public:
  struct Hooks {
    // An error nobody waits for.
    std::function<void(const Status&)> on_error;
    // A reply showed that the store restarted since the last Attach.
    std::function<void()> on_restarted;
    // The store answered (OK: took it) the output of `item`, which ran without a
    // reservation: until then the output is not in the store, so the shard is not done.
    std::function<void(const std::shared_ptr<WorkItem>& item, const Status& answer)>
        on_ahead_answered;
  };
  // `requests`, `items`, `readers` and `arena` (the store's arena, mapped here) must outlive
  // the link.
  // Per lane: both together below the ZeroMQ high-water mark (1,000 messages) of the
  // store's queue of replies to this executor.
  static constexpr size_t kMaxInFlight = 256;

  StoreLink(StoreRequests& requests, ItemSink& items, ObjectReaders& readers, ShmRegion& arena,
            Hooks hooks, RunAheadLimits run_ahead = {}, size_t max_in_flight = kMaxInFlight);

  // `arena` now maps the region of the store process `instance` (StoreHelloReply): replies
  // from any other instance are refused, never read or written through `arena`. Maps it
  // read-only too, for arguments read in place; when that fails they are copied.
  void Attach(uint64_t instance);
  // The store is lost or restarted (`why`): every request it did not answer and every
  // output not yet sealed fails with `why`, and so does every reservation and read until
  // the next Attach.
  void Detach(const Status& why);
  // Whether it is attached, and to which store process instance (0 before the first Attach).
  bool attached() const { return detached_.ok() && instance_ != 0; }
  uint64_t instance() const { return instance_; }

  // Reserves space for output shard (create.object_id, create.shard) of `item`. Returns
  // whether `item` runs ahead of it (its value is put whole once it exists, and the store's
  // answer comes to Hooks::on_ahead_answered); if not, `item` does not run before the
  // space is granted (ItemSink::Reserved). A `deferred` reservation (a data-dependent
  // shape) is only recorded: it is sent once the value exists. Returns the error when the
  // request could not be sent.
  Result<bool> ReserveOutput(proto::CreateObject create, bool deferred,
                             const std::shared_ptr<WorkItem>& item);
  // Reads input `input` of `item` (an object-store source) into the item, or fails it:
  // from a write still in progress on this host, else from the object store (which waits
  // a while for the object to appear).
  void ReadInput(const std::shared_ptr<WorkItem>& item, uint32_t input);
  // The value of output shard (object_id, shard), or the failure of the shard that made
  // it: put whole when its shard ran ahead, else written and sealed once its space is
  // granted. Nothing happens for a shard without a reservation (it failed and was
  // reported then).
  void WriteOutput(uint64_t object_id, uint32_t shard, const Result<Tensor>& value);
  // A reply from the object store; one that answers no pending request is ignored (a
  // pinned read's lease is given back).
  void OnReply(const proto::Incoming& reply);
  // Readable when arguments read in place were dropped: SendUnpins is due. -1: never.
  int unpin_fd() const { return views_.fd(); }
  // Gives the attached store the leases of the arguments read in place that were dropped.
  void SendUnpins();

  // Requests sent and not answered yet, and those waiting for one of them to be answered.
  size_t pending_requests() const { return requests_.size(); }
  size_t queued_requests() const { return lanes_[0].queued.size() + lanes_[1].queued.size(); }
  size_t pending_writes() const { return writes_.size(); }
  // The bytes of outputs shards ran ahead of that the store has not taken yet.
  uint64_t ahead_bytes() const { return ahead_bytes_; }

 private:
  // An output shard going into the store: space is reserved at admission (or once the
  // shard ran, when `deferred`); the bytes are written once both space and value exist.
  struct Write {
    proto::CreateObject create;
    std::optional<uint64_t> offset;  // set by CreateObjectReply
    std::optional<Tensor> value;     // set when the shard ran
    Status failure;                  // a failed shard seals its output with the error
    bool deferred = false;
    bool finished = false;
    // The shard that writes it, until the store answers: it runs only once the space is
    // granted, unless `ahead_bytes` is not 0 (it runs ahead; the value is put whole).
    std::shared_ptr<WorkItem> waiting;
    uint64_t ahead_bytes = 0;
  };
  // What a reply continues.
  struct Request {
    enum Kind { kCreate, kGetInput, kSeal, kPut } kind = kCreate;
    std::shared_ptr<Write> write;    // kCreate, kPut, kSeal
    std::shared_ptr<WorkItem> item;  // kGetInput
    uint32_t input = 0;              // kGetInput
  };

  // Requests of one lane: how many are unanswered, and those waiting to be sent.
  struct Lane {
    size_t in_flight = 0;
    std::deque<Request> queued;
  };
  Lane& LaneOf(const Request& request);
  // Sends `request` now when its lane has fewer than max_in_flight_ unanswered and none
  // queued, else queues it. Returns the error of a request that could not be sent now.
  Status Send(Request request);
  // The request's message, built from what it continues.
  Status Transmit(uint64_t id, const Request& request);
  // Sends queued requests while their lanes allow; one that cannot be sent is answered as
  // if the store had refused it.
  void SendQueued();
  // Continues `request` with the store's `reply` (null: never sent) or `error`.
  void Answer(const Request& request, const proto::Incoming* reply, Status error);
  // Sends the value of a write whose shard ran ahead, whole.
  void Put(const std::shared_ptr<Write>& write);
  void OnCreateReply(const Request& request, const proto::Incoming* reply, Status error);
  void OnGetReply(const Request& request, const proto::Incoming* reply, const Status& error);
  Result<Tensor> ReadArena(const proto::GetObjectReply& reply);
  // Gives back the lease of a pinned read nobody will use (its store is not the attached one).
  void Unpin(uint64_t instance, uint64_t lease);
  // Tells the shard waiting for the write's space that the store answered (`answer`).
  void AnswerWaiting(Write& write, const Status& answer);
  // Hands the write's value (or `failure`) to the shards on this host that read it and were
  // not handed it by the device thread.
  void FeedLocalReaders(Write& write, const Status& failure);
  // Writes the value into its space and seals it, once both exist.
  void Complete(const std::shared_ptr<Write>& write);

  // The reply's error, or Unavailable when it comes from a store instance other than the
  // attached one (which then counts as restarted).
  Status CheckInstance(uint64_t instance);

  StoreRequests& send_;
  ItemSink& items_;
  ObjectReaders& readers_;
  ShmRegion& arena_;
  ArenaViews views_;  // the arena mapped read-only: arguments read in place
  const Hooks hooks_;
  const RunAheadLimits run_ahead_;
  const size_t max_in_flight_;
  uint64_t ahead_bytes_ = 0;
  uint64_t instance_ = 0;
  Status detached_;                       // not OK between Detach and Attach
  std::map<uint64_t, Request> requests_;  // by request id
  std::array<Lane, 2> lanes_;             // reservations and puts; seals and reads
  // Output shards bound for the store, by (object id, shard), until sealed.
  std::map<std::pair<uint64_t, uint32_t>, std::shared_ptr<Write>> writes_;
  uint64_t next_request_ = 1;
};

}  // namespace atl::executor
