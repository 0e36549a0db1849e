#include "services/scheduler/scheduler_service.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "common/net/event_topics.h"
#include "common/net/request_server.h"
#include "common/net/sent_counters.h"
#include "common/proto/ids.h"
#include "common/service/quota.h"
#include "services/scheduler/submission_check.h"

namespace atl::scheduler {

SchedulerService::SchedulerService(zmq::context_t& context, ClusterConfig config,
                                   SchedulerOptions options)
    : context_(context),
      config_(std::move(config)),
      options_(std::move(options)),
      socket_(net::MakeSocket(context, zmq::socket_type::router)),
      executors_(context),
      peers_(context),
      clients_heard_(std::chrono::milliseconds(config_.heartbeat_ms) * config_.liveness),
      // Checks once a period (the "client liveness" timer).
      client_stall_guard_("scheduler " + options_.island,
                          std::chrono::milliseconds(config_.heartbeat_ms),
                          std::chrono::milliseconds(config_.heartbeat_ms), config_.liveness) {
  // Its clients heartbeat the RM alone: their liveness is the RM's table, late after two
  // periods without one.
  clients_heard_.FollowTable(2 * std::chrono::milliseconds(config_.heartbeat_ms),
                             std::chrono::steady_clock::now());
}

Status SchedulerService::Start(std::chrono::milliseconds timeout) {
  ATOLL_ASSIGN_OR_RETURN(auto policy, MakePolicy(options_.policy));
  order_ = std::make_unique<IslandOrder>(std::move(policy), options_.window);
  const std::string bind =
      options_.endpoint.empty() ? "tcp://" + config_.bind_host + ":*" : options_.endpoint;
  ATOLL_ASSIGN_OR_RETURN(endpoint_, BindAndAdvertise(socket_, bind, config_));
  events_ = std::make_unique<EventPublisher>(context_, "scheduler/" + options_.island);
  ATOLL_RETURN_IF_ERROR(events_->Connect(config_.events_in_endpoint));

  rm_ = std::make_unique<net::Requester>(context_, config_.rm_endpoint);
  ATOLL_RETURN_IF_ERROR(rm_->Connect());
  owners_ = std::make_unique<OwnerCache>(
      rm_.get(),
      OwnerCache::LookupTimeout(std::chrono::milliseconds(config_.heartbeat_ms), config_.liveness));
  auto reply = rm_->Call<proto::Ok>(proto::RegisterScheduler{options_.island, endpoint_.advertised},
                                    timeout);
  return reply.status().WithContext("register with the RM at " + config_.rm_endpoint);
}

void SchedulerService::HeartbeatRm() {
  Status sent = rm_->Post(proto::Heartbeat{proto::Heartbeat::kScheduler, options_.island, 0,
                                           loop_.LongestStallMicros()});
  if (!sent.ok()) spdlog::warn("heartbeat: {}", sent.ToString());
}

void SchedulerService::PublishStats() {
  events_->Publish(topics::kNetStats, net::SentCountFields());
  events_->Publish(topics::kSchedulerStats, {{"island", options_.island},
                                             {"queued", uint64_t{order_->queued()}},
                                             {"in_flight", uint64_t{order_->in_flight()}},
                                             {"dispatches_held", uint64_t{executors_.held()}}});
}

void SchedulerService::OnRm() {
  const std::vector<Status> errors = rm_->TakeErrors();
  const bool unknown = std::any_of(errors.begin(), errors.end(),
                                   [](const Status& e) { return e.code() == Code::kNotFound; });
  if (unknown) {
    spdlog::info("registering again with the RM");
    Status sent = rm_->Post(proto::RegisterScheduler{options_.island, endpoint_.advertised});
    if (!sent.ok()) spdlog::warn("register: {}", sent.ToString());
  }
}

void SchedulerService::Run() {
  loop_.AddSocket("submit", socket_, [this] { OnRequest(); });
  loop_.AddSocket("rm", rm_->socket(), [this] { OnRm(); });
  loop_.AddTimer("heartbeat", std::chrono::milliseconds(config_.heartbeat_ms),
                 [this] { HeartbeatRm(); });
  loop_.AddTimer("stats", std::chrono::milliseconds(config_.heartbeat_ms),
                 [this] { PublishStats(); });
  loop_.AddTimer("cross-island waits", std::chrono::milliseconds(config_.heartbeat_ms),
                 [this] { ExpireCrossIslandWaits(); });
  loop_.AddTimer("client liveness", std::chrono::milliseconds(config_.heartbeat_ms),
                 [this] { CheckClients(); });
  // Held messages go on every loop turn: an executor that reads again soon reports the
  // gangs it ran, and each report is a turn. This timer is for one that has nothing to
  // report, without waking an idle scheduler more often than its heartbeats do.
  loop_.AddTimer("held dispatches", std::chrono::milliseconds(config_.heartbeat_ms), [this] {
    if (executors_.held() > 0) DispatchReleased();
  });
  loop_.Run();
}

net::RequestTable<SchedulerService> SchedulerService::MakeRequestTable() {
  using net::MaySend;
  net::RequestTable<SchedulerService> table("the scheduler");
  // Clients' requests: the handlers check that the client they name is the sender's.
  table.Add<proto::SubmitProgram>(MaySend::Anyone(), &SchedulerService::OnSubmit);
  table.Add<proto::CancelRun>(MaySend::Anyone(), &SchedulerService::OnCancelRun);
  table.Add<proto::Goodbye>(MaySend::Anyone(), &SchedulerService::OnGoodbye);
  // Other schedulers' and the RM's notices.
  table.Add<proto::NodeReleased>(MaySend::Members("release a node"),
                                 &SchedulerService::OnNodeReleased);
  table.Add<proto::HostChanged>(MaySend::Members("report a host change"),
                                &SchedulerService::OnHostChanged);
  table.Add<proto::OwnersKnown>(MaySend::Members("tell who owns what"),
                                &SchedulerService::OnOwnersKnown);
  return table;
}

void SchedulerService::OnRequest() {
  net::ServeRequests(socket_, *events_, std::string(topics::kErrorScheduler), rejected_,
                     [this](proto::Incoming& in) { return requests_.Dispatch(*this, in); });
  DispatchReleased();
  AnswerSubmissions();
}

Status SchedulerService::OnNodeReleased(proto::NodeReleased released, proto::Incoming&) {
  ATOLL_RETURN_IF_ERROR(owners_->ClientUser(proto::ClientOfRun(released.run_id)).status());
  order_->OnPeerReleased(released.run_id, released.node);
  return Status::Ok();
}

Status SchedulerService::OnGoodbye(proto::Goodbye bye, proto::Incoming& in) {
  ATOLL_RETURN_IF_ERROR(owners_->CheckGoodbye(in.sender, bye.client_id));
  DropClient(bye.client_id, "said goodbye");
  return net::Reply(socket_, in, proto::Ok{});
}

Status SchedulerService::OnOwnersKnown(proto::OwnersKnown known, proto::Incoming&) {
  ATOLL_RETURN_IF_ERROR(owners_->Learn(known));
  if (known.table) clients_heard_.TableHeard(known.alive_clients, std::chrono::steady_clock::now());
  for (size_t i = 0; i < known.gone_clients.size(); ++i) {
    if (clients_heard_.Tracks(known.gone_clients[i])) {
      DropClient(known.gone_clients[i], "left the cluster: " + known.gone_why[i]);
    }
  }
  return Status::Ok();
}

Status SchedulerService::OnSubmit(proto::SubmitProgram program, proto::Incoming& in) {
  ATOLL_RETURN_IF_ERROR(CheckSubmission(in.sender, program, *owners_));
  const uint64_t run = program.run_id;
  const uint64_t client = program.client_id;
  clients_heard_.Heard(client, std::chrono::steady_clock::now());
  if (in.routing_id) client_routes_[client] = in.routing_id->to_string();
  // A run counts until it finishes, fails or is cancelled here (IslandOrder's unfinished
  // runs), or its client is dropped and its gangs are placed failed.
  ATOLL_RETURN_IF_ERROR(
      CheckQuota({client, "runs_in_flight", "on island " + options_.island, "runs",
                  config_.quotas.runs_in_flight, order_->UnfinishedRunCount(client), 1}));
  const size_t queued_before = order_->queued();
  ATOLL_RETURN_IF_ERROR(order_->Submit(std::move(program)).WithContext("submit"));
  const auto gangs = static_cast<uint32_t>(order_->queued() - queued_before);
  Ordered& ordered = ordered_.emplace_back();
  if (in.routing_id) ordered.client.copy(*in.routing_id);
  ordered.request_id = in.header.request_id();
  ordered.reply = proto::SubmitReply{gangs};
  ordered.scheduled = {{"run", run},
                       {"client", client},
                       {"island", options_.island},
                       {"gangs", uint64_t{gangs}},
                       {"policy", std::string(order_->policy().name())}};
  return Status::Ok();
}

void SchedulerService::AnswerSubmissions() {
  for (Ordered& o : ordered_) {
    Status sent = net::Send(socket_, &o.client, o.request_id, o.reply);
    // A client gone meanwhile hears nothing; its lapse is reported on its own.
    if (!sent.ok()) spdlog::debug("SubmitReply: {}", sent.ToString());
    events_->Publish(topics::kProgramScheduled, o.scheduled);
  }
  ordered_.clear();
}

Status SchedulerService::OnCancelRun(proto::CancelRun cancel, proto::Incoming& in) {
  ATOLL_RETURN_IF_ERROR(CheckCancel(in.sender, cancel, *owners_));
  const Status why =
      Cancelled(fmt::format("run {} was cancelled by client {}", cancel.run_id, cancel.client_id));
  if (!order_->CancelRun(cancel.client_id, cancel.run_id, why)) {
    return Status::Ok();  // finished here already, or never came: nothing to stop
  }
  events_->Publish(
      topics::kRunCancelled,
      {{"run", cancel.run_id}, {"client", cancel.client_id}, {"island", options_.island}});
  CancelAtExecutors({cancel.client_id, cancel.run_id, ""});  // a client names no failure
  return Status::Ok();                                       // a notice: no reply
}

void SchedulerService::CancelAtExecutors(const proto::CancelRun& cancel) {
  auto executors = run_executors_.find(cancel.run_id);
  if (executors == run_executors_.end()) return;
  for (const std::string& endpoint : executors->second) {
    // After the run's dispatches, also when they are held.
    Status sent = executors_.Send(endpoint, cancel);
    if (!sent.ok()) {
      events_->Publish(topics::kErrorScheduler,
                       {{"error", sent.WithContext("cancel at executor " + endpoint).ToString()}});
    }
  }
}

void SchedulerService::OnRunFailed(const IslandOrder::FailedRun& failed,
                                   const proto::GangDone& report) {
  if (!failed.finished) {
    const std::string failure =
        fmt::format("run {} stopped: a shard of it failed ({}: {})", failed.run,
                    CodeName(static_cast<Code>(report.error_code)), report.error);
    order_->CancelRun(failed.client, failed.run, Unavailable(failure));
    CancelAtExecutors({failed.client, failed.run, failure});
  }
  TellRunFailed(failed.client, failed.run,
                Status(static_cast<Code>(report.error_code), report.error));
}

void SchedulerService::TellRunFailed(uint64_t client, uint64_t run, const Status& why) {
  auto route = client_routes_.find(client);
  if (route == client_routes_.end()) return;  // the client left: nobody to tell
  zmq::message_t to(route->second.data(), route->second.size());
  Status sent = net::Send(socket_, &to, 0,
                          proto::RunFailed{run, static_cast<int32_t>(why.code()), why.message()});
  if (!sent.ok()) spdlog::debug("RunFailed for run {}: {}", run, sent.ToString());
}

void SchedulerService::ReportFinishedRuns() {
  for (const auto& finished : order_->TakeFinishedRuns()) {
    run_executors_.erase(finished.run);
    if (!finished.notify_done) continue;
    auto route = client_routes_.find(finished.client);
    if (route == client_routes_.end()) continue;  // the client left: nobody to tell
    zmq::message_t to(route->second.data(), route->second.size());
    Status sent = net::Send(socket_, &to, 0, proto::RunDone{finished.run});
    // A client gone without a goodbye cannot be reached; its lapse is reported on its own.
    if (!sent.ok()) spdlog::debug("RunDone for run {}: {}", finished.run, sent.ToString());
  }
}

void SchedulerService::OnExecutor(const std::string& endpoint) {
  auto socket = executors_.Socket(endpoint);
  if (!socket.ok()) return;
  for (int i = 0; i < 256; ++i) {
    auto frames = net::RecvFrames(**socket, std::chrono::milliseconds(0));
    if (!frames.ok() || !frames->has_value()) break;
    auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/false);
    if (!in.ok()) {
      events_->Publish(topics::kErrorScheduler,
                       {{"executor", endpoint}, {"error", in.status().ToString()}});
      continue;
    }
    if (in->header.kind() == proto::Kind::kGangDone) {
      auto done = in->header.As<proto::GangDone>();
      if (!done.ok()) continue;
      if (auto failed = order_->OnGangDone(endpoint, *done)) OnRunFailed(*failed, *done);
      continue;
    }
    if (in->header.kind() == proto::Kind::kError) {
      auto error = in->header.As<proto::Error>();
      events_->Publish(topics::kErrorScheduler,
                       {{"executor", endpoint},
                        {"error", error.ok() ? error->message : error.status().ToString()}});
    }
  }
  DispatchReleased();
}

void SchedulerService::DropClient(uint64_t client, const std::string& why) {
  clients_heard_.Forget(client);
  client_routes_.erase(client);
  owners_->ForgetClient(client);
  const Status dropped = Cancelled(fmt::format("client {} {}", client, why));
  // Its shards already at executors stop too: nobody waits for what they make.
  const std::vector<uint64_t> unfinished = order_->UnfinishedRuns(client);
  if (const size_t runs = order_->DropClient(client, dropped); runs > 0) {
    events_->Publish(
        topics::kClientDropped,
        {{"client", client}, {"island", options_.island}, {"runs", uint64_t{runs}}, {"why", why}});
  }
  for (uint64_t run : unfinished) CancelAtExecutors({client, run, ""});
  DispatchReleased();
}

Status SchedulerService::OnHostChanged(proto::HostChanged changed, proto::Incoming&) {
  if (!changed.lost) {
    order_->ExecutorBack(changed.control_endpoint);
    return Status::Ok();
  }
  const Status lost = Unavailable(changed.reason);
  const std::vector<uint64_t> failed = order_->ExecutorLost(changed.control_endpoint, lost);
  // Their shards on other hosts stop too: a collective partner there would wait for the
  // lost host's share until the collective's bound, holding its device (a restarted
  // executor is back at once, without the work the old one had). Their clients hear it
  // from here as well as from the RM.
  for (uint64_t run : failed) {
    CancelAtExecutors({0, run, changed.reason});
    TellRunFailed(proto::ClientOfRun(run), run, lost);
  }
  // Its runs failed on the loss: what is held for it (their cancels to it included) would
  // only wait for it to come back.
  if (const size_t dropped = executors_.Drop(changed.control_endpoint); dropped > 0) {
    spdlog::info("dropped {} messages held for lost executor {}", dropped,
                 changed.control_endpoint);
  }
  if (!failed.empty()) {
    events_->Publish(topics::kHostLostRuns, {{"island", options_.island},
                                             {"host", changed.host},
                                             {"runs", fmt::format("{}", fmt::join(failed, ","))},
                                             {"reason", changed.reason}});
  }
  DispatchReleased();
  return Status::Ok();
}

void SchedulerService::CheckClients() {
  const auto now = std::chrono::steady_clock::now();
  if (!client_stall_guard_.MayJudge(now)) return;
  for (uint64_t client : clients_heard_.TakeSilent(now)) {
    DropClient(client, fmt::format("left out of the RM's table for {} heartbeat periods",
                                   config_.liveness));
  }
}

void SchedulerService::ExpireCrossIslandWaits() {
  const int64_t held_us = int64_t{config_.cross_island_wait_ms} * 1000;
  for (const auto& e : order_->Expire(SteadyMicros(), held_us)) {
    events_->Publish(
        topics::kErrorGang,
        {{"run", e.run},
         {"node", uint64_t{e.node}},
         {"client", e.client},
         {"island", options_.island},
         {"error", fmt::format("waited over {} ms for nodes {} of other "
                               "islands to be scheduled",
                               config_.cross_island_wait_ms, fmt::join(e.waiting_for, ","))}});
  }
  DispatchReleased();
}

void SchedulerService::DispatchReleased() {
  executors_.Retry();  // what executors' full queues refused goes first, as they take it
  SendDispatches(order_->Release());
  for (auto& notice : order_->TakeNotices()) {
    Status sent = [&]() -> Status {
      ATOLL_ASSIGN_OR_RETURN(zmq::socket_t * peer, peers_.Get(notice.scheduler));
      return net::Send(*peer, nullptr, 0, notice.released);
    }();
    if (!sent.ok()) {
      events_->Publish(
          topics::kErrorScheduler,
          {{"error", sent.WithContext("tell scheduler " + notice.scheduler).ToString()}});
    }
  }
  ReportFinishedRuns();
}

void SchedulerService::SendDispatches(std::map<std::string, proto::Dispatch> released) {
  for (auto& [endpoint, dispatch] : released) {
    for (size_t i = 0; i < dispatch.entries.size(); ++i) {
      const uint64_t run = dispatch.entries[i].run_id;
      if (i == 0 || dispatch.entries[i - 1].run_id != run) run_executors_[run].insert(endpoint);
    }
    Status sent = [&]() -> Status {
      if (polled_.insert(endpoint).second) {  // its first dispatch: read its reports
        ATOLL_ASSIGN_OR_RETURN(zmq::socket_t * executor, executors_.Socket(endpoint));
        loop_.AddSocket("executor " + endpoint, *executor,
                        [this, endpoint] { OnExecutor(endpoint); });
      }
      return executors_.Send(endpoint, dispatch);
    }();
    if (!sent.ok()) {
      // It can never go (not an endpoint): those shards will never report. Take them out of
      // the flight so the window moves on, and fail their runs as a failed shard does
      // (their partners elsewhere stop).
      const Status failure = sent.WithContext("dispatch to executor " + endpoint);
      std::vector<proto::GangDone> lost;
      for (const auto& e : dispatch.entries) {
        if (lost.empty() || lost.back().gang_seq != e.gang_seq) {
          lost.emplace_back().gang_seq = e.gang_seq;
          lost.back().error_code = static_cast<int32_t>(failure.code());
          lost.back().error = failure.message();
        }
        lost.back().shards++;
      }
      for (const auto& gang : lost) {
        if (auto failed = order_->OnGangDone(endpoint, gang)) OnRunFailed(*failed, gang);
      }
      events_->Publish(topics::kErrorScheduler, {{"error", failure.ToString()}});
    }
  }
}

}  // namespace atl::scheduler
