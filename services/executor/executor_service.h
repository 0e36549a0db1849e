// The executor: one per host. It owns the host's devices (one DeviceStream each), the
// compiled functions, and the data plane to other executors.
//
// For every Dispatch it does the host-side work for all entries at once, before any input
// exists: resolves each input (a tuple to wait for, or an object-store argument to read),
// reserves object-store space for outputs that land there, and queues each shard on its
// device stream in gang order. When a shard finishes, its outputs go straight to the
// consuming executors as tuples tagged with the destination shard, batched per host
// (TupleOutbox), or into the local object store through the shared-memory arena.
//
// Threading: Run() owns every socket and all maps; device streams run kernels on their
// own threads and hand results back through a queue plus an inproc wake-up socket.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "common/base/shm_arena.h"
#include "common/net/event_loop.h"
#include "common/net/events.h"
#include "common/net/transport.h"
#include "common/proto/codec.h"
#include "common/service/config.h"
#include "services/executor/collective_hub.h"
#include "services/executor/device_stream.h"
#include "services/executor/gang_reports.h"
#include "services/executor/piece_assembler.h"
#include "services/executor/tuple_outbox.h"
#include "services/executor/work_item.h"

namespace atl::executor {

class ExecutorService {
 public:
  ExecutorService(zmq::context_t& context, ClusterConfig config, std::string host,
                  std::string store_endpoint);
  ~ExecutorService();

  // Binds, maps the object store's arena and registers with the RM (bounded by `timeout`).
  Status Start(std::chrono::milliseconds timeout);
  void Run();

  const std::string& control_endpoint() const { return control_endpoint_; }
  const std::string& data_endpoint() const { return data_endpoint_; }

 private:
  struct Function {
    std::shared_ptr<const ir::FunctionDef> def;
    uint32_t num_shards = 0;
    std::shared_ptr<const GangLayout> layout;
  };
  // A tuple a device thread wants sent (a collective partial); the loop sends it.
  struct OutgoingTuple {
    std::string endpoint;
    proto::TupleHeader header;
    Tensor value;
  };
  // An output shard going into the local object store: space is reserved at dispatch
  // (CreateObject), the bytes are written once both the space and the value exist. An
  // output of data-dependent shape is reserved once the shard ran (`deferred`).
  struct StoreWrite {
    proto::CreateObject create;
    std::optional<uint64_t> offset;  // set by CreateObjectReply
    std::optional<Tensor> value;     // set when the shard ran
    Status failure;                  // a failed shard seals its output with the error
    bool deferred = false;           // reserved when the value exists
    bool finished = false;
    std::shared_ptr<WorkItem> waiting;  // the shard that runs once this space is granted
    // Shards on this host admitted to read this object before it was written: they get
    // the value from here, not through the store (a chain of op-by-op calls).
    std::vector<std::pair<std::shared_ptr<WorkItem>, uint32_t>> local_readers;
  };
  // What an object-store reply continues.
  struct StoreRequest {
    enum Kind { kCreate, kGetInput, kSeal } kind = kCreate;
    std::shared_ptr<StoreWrite> write;  // kCreate
    std::shared_ptr<WorkItem> item;     // kGetInput
    uint32_t input = 0;                 // kGetInput
  };

  void OnControl();
  void OnDispatch(proto::Dispatch dispatch, const std::string& scheduler);
  Status OnRunLoop(proto::Incoming& in);
  void OnData();
  Status OnTupleBatch(proto::Incoming& in);
  void OnRm();
  void OnCompile(const proto::Incoming& in);
  // A peer executor was lost (or came back): shards waiting for its tuples fail.
  void OnHostChanged(const proto::Incoming& in);
  void OnStore();
  void OnCompletions();
  void Heartbeat();

  void Admit(proto::Entry entry, const std::string& scheduler);
  // Thread-safe: called by the loop and by device threads.
  void DeliverInput(const InputKey& key, Result<Tensor> value);
  // On a device thread: hands a finished shard's outputs to consumers on this host.
  void DeliverLocalTuples(Completion& done);
  void SendOutputs(Completion& done);
  void FlushTuples();
  // Of output `output`, the rows a sparse-exchange destination gets (or why none can go).
  Result<Tensor> RoutedRows(const Completion& done, size_t output, const proto::OutputDest& dest);
  // A tuple for a shard on this host: delivered, or added to the shard's pieces.
  void ReceiveTuple(const proto::TupleHeader& h, Result<Tensor> value);
  // Queues a tuple for `endpoint` in its host's batch (or delivers it here when local).
  void QueueTuple(const std::string& endpoint, proto::TupleHeader header, Result<Tensor> value);
  // Wakes the loop from a device thread.
  void Wake();
  Status SendStore(StoreRequest request, const auto& body);
  Status ReserveStoreWrite(const std::shared_ptr<StoreWrite>& write);
  // Hands the write's value (or its failure) to the shards on this host that read it.
  void FeedLocalReaders(StoreWrite& write, const Status& failure);
  void CompleteStoreWrite(const std::shared_ptr<StoreWrite>& write);
  Result<Tensor> ReadArena(const proto::GetObjectReply& reply);

  zmq::context_t& context_;
  ClusterConfig config_;
  std::string host_;
  std::string island_;
  uint32_t num_devices_ = 0;
  uint64_t device_memory_bytes_ = 0;
  std::vector<uint32_t> device_ids_;  // cluster-wide ids of devices_, given by the RM

  zmq::socket_t control_;  // ROUTER: Dispatch from schedulers
  zmq::socket_t data_;     // ROUTER: TupleBatch from peer executors
  int wake_fd_ = -1;       // eventfd: device streams say "completions are waiting"
  net::Requester rm_;
  net::Requester store_;
  std::unique_ptr<ShmRegion> arena_;
  std::unique_ptr<EventPublisher> events_;
  EventLoop loop_;
  std::string control_endpoint_;
  std::string data_endpoint_;

  std::map<uint64_t, Function> functions_;
  // Peers the RM declared lost, by control endpoint: why their tuples will never come.
  std::map<std::string, Status> lost_peers_;
  std::vector<std::unique_ptr<DeviceStream>> devices_;
  // Items waiting for inputs, by input key; tuples that came before their entry.
  std::mutex mailbox_mu_;
  std::map<InputKey, std::shared_ptr<WorkItem>> waiting_;  // guarded by mailbox_mu_
  std::map<InputKey, Result<Tensor>> early_;               // guarded by mailbox_mu_
  std::map<uint64_t, StoreRequest> store_requests_;        // by request id
  // Output shards bound for the object store, by (object id, shard), until sealed.
  std::map<std::pair<uint64_t, uint32_t>, std::shared_ptr<StoreWrite>> store_writes_;
  uint64_t next_store_request_ = 1;
  // Gangs with shards running here, reported to their scheduler once all of them finished.
  GangReports gang_reports_;
  TupleOutbox outbox_;  // tuples for other hosts, batched per destination
  // Received over the data plane since start, published as `dataplane.stats`.
  struct Received {
    uint64_t tuples = 0;
    uint64_t batches = 0;
    uint64_t bytes = 0;
    int64_t last_us = 0;  // wall clock of the latest batch
  } received_;

  std::unique_ptr<CollectiveHub> hub_;
  PieceAssembler pieces_;  // consumer shards being put together from reshard pieces

  std::mutex completions_mu_;
  std::vector<Completion> completions_;  // guarded by completions_mu_
  std::vector<OutgoingTuple> outgoing_;  // guarded by completions_mu_
};

}  // namespace atl::executor
