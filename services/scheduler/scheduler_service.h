// The island scheduler: owns the island's single total order of gangs (IslandOrder) and
// its scheduling policy. Clients send each program's subgraph for the island in one
// message; released gangs go to executors as one Dispatch per executor per release, the
// entries in gang order. Executors report finished shards back on the same connection,
// which moves the policy's window on. Clients heartbeat their schedulers as they do their
// object stores: the queued runs of a client that goes silent (or says goodbye) are dropped.
// The scheduler heartbeats the RM in turn, which declares its island lost when it falls
// silent, and registers again when the RM no longer knows it (an RM restarted without
// its state).
// A run submitted with notify_done gets a RunDone back on its client's connection once all
// its gangs here are done; a CancelRun drops the run's queued gangs and is passed on to the
// executors that got its entries.
//
// Threading: Run() owns every socket; all handlers run on that one loop.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>

#include <zmq.hpp>

#include "common/net/event_loop.h"
#include "common/net/events.h"
#include "common/net/rejection_log.h"
#include "common/net/request_table.h"
#include "common/net/transport.h"
#include "common/proto/codec.h"
#include "common/service/advertise.h"
#include "common/service/client_liveness.h"
#include "common/service/config.h"
#include "common/service/owner_cache.h"
#include "common/service/stall_guard.h"
#include "services/scheduler/executor_links.h"
#include "services/scheduler/island_order.h"

namespace atl::scheduler {

struct SchedulerOptions {
  std::string island;
  std::string policy = "fifo";  // "fifo" or "share"
  size_t window = 0;            // gangs in flight on the island at most; 0: no limit
  // Where to bind; empty: a free port on the config's bind_host. A restarted scheduler is
  // given its old address, so that clients' and executors' connections reach it again.
  std::string endpoint;
};

class SchedulerService {
 public:
  SchedulerService(zmq::context_t& context, ClusterConfig config, SchedulerOptions options);

  // Makes the policy, binds the client socket and registers with the RM (retrying until
  // `timeout`).
  Status Start(std::chrono::milliseconds timeout);
  void Run();

  // Where clients and executors reach it (registered with the RM), and what it bound.
  const ServiceEndpoint& endpoint() const { return endpoint_; }

 private:
  void OnRequest();
  // The requests it serves, one row each (who may send it, its handler): requests_.
  static net::RequestTable<SchedulerService> MakeRequestTable();
  // Orders a submission; its answer and program.scheduled wait for AnswerSubmissions.
  Status OnSubmit(proto::SubmitProgram program, proto::Incoming& in);
  // Answers the submissions ordered in this loop turn and publishes their program.scheduled,
  // after the turn's dispatches went out: on a synchronous call's path, the executor gets its
  // work before the client and the event stream get theirs (they cost the scheduler about
  // 35 us a submission on this project's 2-core machines).
  void AnswerSubmissions();
  // Cancels the client's run here (IslandOrder::CancelRun) and tells the executors that got
  // its entries, which stop it.
  Status OnCancelRun(proto::CancelRun cancel, proto::Incoming& in);
  // Another island's scheduler released a node this island's gangs consume: kept until its
  // run comes, only for a connected client's (as a submission). A notice: no reply.
  Status OnNodeReleased(proto::NodeReleased released, proto::Incoming& in);
  Status OnGoodbye(proto::Goodbye bye, proto::Incoming& in);
  Status OnOwnersKnown(proto::OwnersKnown known, proto::Incoming& in);  // a notice: no reply
  // Forgets finished runs' executors, and sends RunDone to the clients that asked for it.
  void ReportFinishedRuns();
  void OnExecutor(const std::string& endpoint);
  // Sends what the order releases now, and tells other islands' schedulers which of their
  // consumers' producers took their places.
  void DispatchReleased();
  void SendDispatches(std::map<std::string, proto::Dispatch> released);
  // Fails runs held too long for other islands (IslandOrder::Expire).
  void ExpireCrossIslandWaits();
  // A client that said goodbye, that the RM dropped, or that the RM's table left out for
  // `liveness` heartbeat periods (ClientLiveness::FollowTable): its queued runs are dropped
  // (IslandOrder::DropClient) and a client.dropped event says how many.
  void DropClient(uint64_t client, const std::string& why);
  void CheckClients();
  // Passes `cancel` on to the executors the run's entries went to (for a failed run, with its
  // failure).
  void CancelAtExecutors(const proto::CancelRun& cancel);
  // A shard of `failed` failed (`report`): its client hears it (RunFailed), and the rest of
  // the run stops, here and at its executors, rather than wait out a collective for the
  // failed shard's share.
  void OnRunFailed(const IslandOrder::FailedRun& failed, const proto::GangDone& report);
  // Tells `client` that its run `run` failed (RunFailed, a notice), if it is still here.
  void TellRunFailed(uint64_t client, uint64_t run, const Status& why);
  // The RM's HostChanged: the queued runs that need a lost executor fail at once, naming
  // its host, and so do later ones until it is back (IslandOrder::ExecutorLost). Their
  // clients hear it from here too, not only from the RM, whose notices a client misses
  // while the RM restarts.
  Status OnHostChanged(proto::HostChanged changed, proto::Incoming& in);
  void HeartbeatRm();
  // Every heartbeat, for watchers (`atoll dashboard`'s metrics, bench/control): net.stats
  // (messages sent) and scheduler.stats {island, queued, in_flight, dispatches_held} (gangs
  // waiting here, gangs dispatched and not finished, and messages held for executors whose
  // queue is full, ExecutorLinks).
  void PublishStats();
  // The RM's answers: an Error to a heartbeat means it does not know this scheduler.
  void OnRm();

  zmq::context_t& context_;
  ClusterConfig config_;
  SchedulerOptions options_;
  zmq::socket_t socket_;
  std::unique_ptr<EventPublisher> events_;
  net::RejectionLog rejected_;  // requests refused, logged rate-limited per peer
  const net::RequestTable<SchedulerService> requests_ = MakeRequestTable();
  std::unique_ptr<IslandOrder> order_;
  EventLoop loop_;
  ServiceEndpoint endpoint_;
  std::unique_ptr<net::Requester> rm_;
  std::unique_ptr<OwnerCache> owners_;  // asks rm_
  ExecutorLinks executors_;             // to executors' control endpoints
  net::DealerPool peers_;               // to other islands' schedulers
  // When each client was last heard from (a heartbeat or a submission).
  ClientLiveness clients_heard_;
  StallGuard client_stall_guard_;  // whether CheckClients may drop silent clients now
  std::set<std::string> polled_;   // executors whose replies the loop reads
  // Each client's routing id on socket_ (its latest submission's): where RunDone goes.
  std::map<uint64_t, std::string> client_routes_;
  // The executors each unfinished run's entries were dispatched to: where CancelRun goes.
  std::map<uint64_t, std::set<std::string>> run_executors_;
  // Submissions ordered in this loop turn, not answered yet.
  struct Ordered {
    zmq::message_t client;  // routing id
    uint64_t request_id = 0;
    proto::SubmitReply reply;
    EventFields scheduled;  // of program.scheduled
  };
  std::vector<Ordered> ordered_;
};

}  // namespace atl::scheduler
