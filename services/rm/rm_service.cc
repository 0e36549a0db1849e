#include "services/rm/rm_service.h"

#include <type_traits>
#include <utility>
#include <variant>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/net/event_topics.h"
#include "common/net/request_server.h"
#include "common/net/sent_counters.h"
#include "common/net/transport.h"
#include "common/service/advertise.h"

namespace atl::rm {

namespace {

Caller CallerOf(const proto::Incoming& in) {
  return {in.routing_id ? in.routing_id->to_string() : std::string(), in.header.request_id(),
          in.sender};
}

// Sends `message` on `socket` (to `routing_id`, when not null).
Status SendMessage(zmq::socket_t& socket, const zmq::message_t* routing_id, uint64_t request_id,
                   const RmMessage& message) {
  return std::visit(
      [&](const auto& body) { return net::Send(socket, routing_id, request_id, body); }, message);
}

// A notice that may find its peer gone as a matter of course (a client that left, a lost
// executor's old connection, a store or scheduler that stopped reading): not worth a warning.
bool Routine(const RmMessage& message) {
  return std::holds_alternative<proto::ServiceChanged>(message) ||
         std::holds_alternative<proto::OwnersKnown>(message);
}

}  // namespace

RmService::RmService(zmq::context_t& context, ClusterConfig config, std::string state_file)
    : context_(context),
      config_(std::move(config)),
      state_file_(std::move(state_file)),
      socket_(net::MakeSocket(context, zmq::socket_type::router)),
      proxy_(context),
      controller_(ControllerOptions::From(config_), MakeSpreadEvenlyPolicy(), Clock::now()),
      stores_(context),
      schedulers_(context) {}

Status RmService::Bind() {
  ATOLL_RETURN_IF_ERROR(LoadState());
  ATOLL_ASSIGN_OR_RETURN(endpoint_, BindAndAdvertise(socket_, config_.rm_endpoint, config_));
  ATOLL_RETURN_IF_ERROR(proxy_.Start(config_.events_in_endpoint, config_.events_out_endpoint));
  events_in_.bound = proxy_.in_endpoint();
  events_out_.bound = proxy_.out_endpoint();
  ATOLL_ASSIGN_OR_RETURN(events_in_.advertised, AdvertisedEndpoint(events_in_.bound, config_));
  ATOLL_ASSIGN_OR_RETURN(events_out_.advertised, AdvertisedEndpoint(events_out_.bound, config_));
  events_ = std::make_unique<EventPublisher>(context_, "rm");
  ATOLL_RETURN_IF_ERROR(events_->Connect(events_in_.advertised));
  return Status::Ok();
}

void RmService::Run() {
  loop_.AddSocket("request", socket_, [this] { OnRequest(); });
  loop_.AddTimer("liveness", LivenessCheckPeriod(config_.heartbeat_ms),
                 [this] { CheckLiveness(); });
  loop_.AddTimer("net.stats", std::chrono::milliseconds(config_.heartbeat_ms),
                 [this] { events_->Publish(topics::kNetStats, net::SentCountFields()); });
  loop_.Run();
  FlushState();
  proxy_.Stop();
}

void RmService::OnRequest() {
  net::ServeRequests(socket_, *events_, std::string(topics::kErrorRm), rejected_,
                     [this](proto::Incoming& in) { return Dispatch(in); });
  FlushState();
}

void RmService::CheckLiveness() {
  (void)Carry(controller_.CheckLiveness(Clock::now()), nullptr);
  FlushState();
}

net::RequestTable<RmService> RmService::MakeRequestTable() {
  using net::MaySend;
  net::RequestTable<RmService> table("the RM");
  // Services join, look up owners and drain hosts; executors answer compiles.
  table.Add<proto::RegisterExecutor>(
      MaySend::Members("register an executor"),
      &RmService::Serve<proto::RegisterExecutor, &Controller::RegisterExecutor>);
  table.Add<proto::RegisterScheduler>(
      MaySend::Members("register a scheduler"),
      &RmService::Serve<proto::RegisterScheduler, &Controller::RegisterScheduler>);
  table.Add<proto::LookupOwners>(MaySend::Members("look up owners"), &RmService::OnLookupOwners);
  table.Add<proto::DrainHost>(MaySend::Members("drain a host"),
                              &RmService::Serve<proto::DrainHost, &Controller::DrainHost>);
  table.Add<proto::Ok>(MaySend::Members("answer a compile"), &RmService::OnCompileDone);
  table.Add<proto::Error>(MaySend::Members("answer a compile"), &RmService::OnCompileFailed);
  // A client acts for itself (a service's heartbeat comes from a member).
  table.Add<proto::Heartbeat>(MaySend::OwningClient("heartbeat"),
                              &RmService::Serve<proto::Heartbeat, &Controller::Heartbeat>);
  table.Add<proto::Goodbye>(MaySend::OwningClient("say goodbye"),
                            &RmService::Serve<proto::Goodbye, &Controller::Goodbye>);
  table.Add<proto::CreateSlice>(MaySend::OwningClient("create a slice"),
                                &RmService::Serve<proto::CreateSlice, &Controller::CreateSlice>);
  table.Add<proto::RegisterFunction>(
      MaySend::OwningClient("register a function"),
      &RmService::Serve<proto::RegisterFunction, &Controller::RegisterFunction>);
  // Anyone: a client says hello first; `atoll status` asks as anyone.
  table.Add<proto::HelloClient>(MaySend::Anyone(),
                                &RmService::Serve<proto::HelloClient, &Controller::HelloClient>);
  table.Add<proto::GetClusterStatus>(MaySend::Anyone(), &RmService::OnClusterStatus);
  return table;
}

template <typename Request, RmService::Decision<Request> decide>
Status RmService::Serve(Request req, proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(RmActions actions, (controller_.*decide)(req, CallerOf(in), Clock::now()));
  return Carry(std::move(actions), &in);
}

Status RmService::OnCompileDone(proto::Ok, proto::Incoming& in) {
  (void)Carry(controller_.CompileAnswered(in.header.request_id(), Status::Ok()), nullptr);
  return Status::Ok();  // a reply: never answered itself
}

Status RmService::OnCompileFailed(proto::Error failed, proto::Incoming& in) {
  (void)Carry(controller_.CompileAnswered(in.header.request_id(), proto::FromError(failed)),
              nullptr);
  return Status::Ok();  // a reply: never answered itself
}

Status RmService::OnLookupOwners(proto::LookupOwners req, proto::Incoming& in) {
  return net::Reply(socket_, in, controller_.LookupOwners(req));
}

Status RmService::OnClusterStatus(proto::GetClusterStatus, proto::Incoming& in) {
  proto::ClusterStatus status = controller_.DescribeCluster();
  status.events_in = events_in_.advertised;
  status.events_out = events_out_.advertised;
  status.rm_stall_us = loop_.LongestStallMicros();
  return net::Reply(socket_, in, status);
}

Status RmService::Carry(RmActions actions, const proto::Incoming* in) {
  if (actions.state_changed) state_dirty_ = true;
  Status replied;
  for (RmAction& action : actions.list) {
    if (auto* reply = std::get_if<ReplyAction>(&action)) {
      if (in != nullptr) replied = Answer(*in, reply->message);
    } else if (auto* send = std::get_if<SendAction>(&action)) {
      Carry(*send);
    } else if (auto* tell = std::get_if<TellAction>(&action)) {
      Carry(*tell);
    } else if (auto* event = std::get_if<PublishAction>(&action)) {
      events_->Publish(event->topic, event->fields);
    } else if (std::holds_alternative<WriteStateAction>(action)) {
      state_dirty_ = true;
      FlushState();
    } else if (auto* append = std::get_if<AppendFunctionAction>(&action)) {
      SaveFunction(append->id);
    }
  }
  // A change after a write within the list is written by the end of the turn all the same.
  if (actions.state_changed) state_dirty_ = true;
  return replied;
}

void RmService::Carry(SendAction& send) {
  zmq::message_t routing(send.routing_id.data(), send.routing_id.size());
  const Status sent = SendMessage(socket_, &routing, send.request_id, send.message);
  if (sent.ok()) return;
  if (std::holds_alternative<proto::Compile>(send.message)) {
    // The compile's registration or remap fails at once rather than at its deadline.
    spdlog::warn("compile on {}: {}", send.to, sent.ToString());
    (void)Carry(
        controller_.CompileUnsent(send.request_id, sent.WithContext("compile on " + send.to)),
        nullptr);
    return;
  }
  spdlog::log(Routine(send.message) ? spdlog::level::debug : spdlog::level::warn, "{} to {}: {}",
              std::visit([](const auto& m) { return proto::KindName(m.kKind); }, send.message),
              send.to, sent.ToString());
}

void RmService::Carry(TellAction& tell) {
  net::DealerPool& pool = tell.service == ServiceKind::kStore ? stores_ : schedulers_;
  auto socket = pool.Get(tell.endpoint);
  const Status sent =
      socket.ok() ? SendMessage(**socket, nullptr, 0, tell.message) : socket.status();
  if (!sent.ok()) {
    spdlog::log(Routine(tell.message) ? spdlog::level::debug : spdlog::level::warn,
                "notice to {}: {}", tell.endpoint, sent.ToString());
  }
}

}  // namespace atl::rm
