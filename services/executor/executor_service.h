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
// This class is the shell: sockets, the event loop, heartbeats, events and wiring. The
// decisions live in parts that run without it: AdmissionCore (what an entry needs),
// InputMailbox (tuples meeting their shards), StoreLink (the object-store conversation),
// OutputRouter (where outputs and received tuples go), CollectiveHub and DeviceStreams;
// what its events carry is executor_events.h's.
//
// Threading: Run() owns every socket; device streams run kernels on their own threads,
// feed consumers on this host through the mailbox, and hand results back to the loop
// through a queue plus an eventfd.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "common/base/shm_arena.h"
#include "common/base/spin_condition.h"
#include "common/net/event_loop.h"
#include "common/net/events.h"
#include "common/net/rejection_log.h"
#include "common/net/transport.h"
#include "common/proto/codec.h"
#include "common/service/advertise.h"
#include "common/service/config.h"
#include "common/service/host_options.h"
#include "services/executor/admission.h"
#include "services/executor/collective_hub.h"
#include "services/executor/completion_queue.h"
#include "services/executor/device_streams.h"
#include "services/executor/executor_events.h"
#include "services/executor/gang_reports.h"
#include "services/executor/held_dispatches.h"
#include "services/executor/input_mailbox.h"
#include "services/executor/output_router.h"
#include "services/executor/store_link.h"
#include "services/executor/tuple_outbox.h"
#include "services/executor/work_item.h"

namespace atl::executor {

class ExecutorService {
 public:
  ExecutorService(zmq::context_t& context, ClusterConfig config, const HostPlacement& where,
                  std::string store_endpoint);
  ~ExecutorService();

  // Before Start(): bind these addresses instead of free ports on the config's bind_host (a
  // restarted executor comes back where its peers know it); an empty one: a free port.
  void BindOn(std::string control_endpoint, std::string data_endpoint);
  // Before Start(): how long device threads and collectives spin before they sleep
  // (the host's wait_spin_us unless set; 0 where many hosts' threads share a process).
  void SetWaitSpin(std::chrono::microseconds spin) { wait_spin_ = spin; }
  // Binds, maps the object store's arena and registers with the RM (bounded by `timeout`).
  Status Start(std::chrono::milliseconds timeout);
  // Serves until Stop() (from any thread) or a shutdown signal.
  void Run();
  void Stop() { loop_.Stop(); }

  // Valid after Start(): where peers reach it (registered with the RM), and what it bound.
  const ServiceEndpoint& control_endpoint() const { return control_endpoint_; }
  const ServiceEndpoint& data_endpoint() const { return data_endpoint_; }

 private:
  void OnControl();
  // Admits `dispatch` now, or holds it (HeldDispatches) while it names a function the RM
  // is still to compile here or an earlier one is held.
  void OnDispatch(proto::Dispatch dispatch, const std::string& scheduler);
  // Admits the held dispatches whose functions came or whose wait is over.
  void AdmitHeld();
  // Does the host-side work for every entry of `dispatch` and queues its shards.
  void AdmitDispatch(proto::Dispatch dispatch, const std::string& scheduler);
  Status OnRunLoop(proto::Incoming& in);
  // The run's scheduler cancelled it: its shards here fail with Cancelled, a running one at
  // its next check.
  Status OnCancelRun(const proto::Incoming& in);
  void OnData();
  Status OnTupleBatch(proto::Incoming& in);
  void OnRm();
  void OnCompile(const proto::Incoming& in);
  // A peer executor was lost (or came back): shards waiting for its tuples or for its
  // partials in collectives fail, and so do later entries that need it.
  void OnHostChanged(const proto::Incoming& in);
  // The RM says this host's object store was lost or is back (another host's store is no
  // concern of this executor's).
  void OnServiceChanged(const proto::Incoming& in);
  // Asks the host's object store for its arena and maps it: at start, and whenever the store
  // came back or turned out to have restarted. What was asked of the old one has failed.
  Status AttachStore(std::chrono::milliseconds timeout);
  // What the store link had pending fails: the store process it talked to is gone.
  void DetachRestartedStore();
  void OnStore();
  void OnCompletions();
  void Heartbeat();
  // Fails shards that waited longer than [executor] input_wait_ms for a tuple.
  void FailLateInputs();
  bool IsCompiled(uint64_t function_id) const { return admission_->Find(function_id) != nullptr; }

  // Carries out the admission of one entry: reserves, queues, reads and awaits inputs.
  void Admit(proto::Entry entry, const std::string& scheduler);
  // Reports the shard to its scheduler and the event stream, and sends its outputs.
  void SendOutputs(const Completion& done);
  // The store answered a reservation `item` ran ahead of: one more part of its gang's report.
  void OnAheadAnswered(const WorkItem& item, const Status& answer);
  void FlushTuples();
  void PublishError(const Status& error);
  void Publish(const ExecutorEvent& event, int64_t ts_us = 0);

  zmq::context_t& context_;
  ClusterConfig config_;
  std::string host_;
  std::string island_;
  std::string device_kind_;
  uint32_t num_devices_ = 0;
  uint64_t device_memory_bytes_ = 0;
  uint32_t matmul_threads_ = 0;          // per device; 0: an even share of the cores
  std::chrono::microseconds wait_spin_;  // [[islands.hosts]] wait_spin_us, or SetWaitSpin
  std::vector<uint32_t> device_ids_;     // cluster-wide ids of devices_, given by the RM

  zmq::socket_t control_;  // ROUTER: Dispatch from schedulers
  zmq::socket_t data_;     // ROUTER: TupleBatch from peer executors
  net::Requester rm_;
  net::Requester store_;
  std::unique_ptr<ShmRegion> arena_;
  // A store reply came from a new store process, or the store came back: AttachStore is due.
  bool store_restarted_ = false;
  std::unique_ptr<EventPublisher> events_;
  // Messages refused on every socket (requests, tuples, bad replies), logged rate-limited.
  net::RejectionLog rejected_;
  EventLoop loop_;
  std::string bind_control_, bind_data_;  // asked for (BindOn); empty: a free port
  ServiceEndpoint control_endpoint_;
  ServiceEndpoint data_endpoint_;

  // Made by Start, once the host's devices, endpoints and arena are known.
  std::unique_ptr<AdmissionCore> admission_;
  std::unique_ptr<CollectiveHub> hub_;
  std::unique_ptr<StoreLink> store_link_;
  std::unique_ptr<OutputRouter> router_;
  DeviceStreams devices_;
  InputMailbox mailbox_{devices_};  // tuple inputs, from the loop and device threads
  // Inputs from objects this host is writing, from the loop and device threads.
  ObjectReaders object_readers_{devices_};
  SocketStoreRequests store_requests_{store_.socket()};
  // Gangs with shards running here, reported to their scheduler once all of them finished.
  GangReports gang_reports_;
  // Waiting for the Compile of RegisterExecutorReply::functions_coming, [executor]
  // compile_wait_ms at most, held_dispatch_bytes of argument values at most.
  HeldDispatches held_{config_.held_dispatch_bytes};
  TupleOutbox outbox_;           // tuples for other hosts, batched per destination
  ReceivedTuples received_;      // over the data plane since start, for `dataplane.stats`
  CompletionQueue completions_;  // from the device threads to the loop
};

}  // namespace atl::executor
