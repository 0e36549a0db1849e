#include "services/scheduler/scheduler_service.h"

#include <set>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/request_server.h"
#include "common/transport.h"

namespace atl::scheduler {

SchedulerService::SchedulerService(zmq::context_t& context, ClusterConfig config,
                                   std::string island)
    : context_(context),
      config_(std::move(config)),
      island_(std::move(island)),
      socket_(net::MakeSocket(context, zmq::socket_type::router)),
      executors_(context) {}

Status SchedulerService::Start(std::chrono::milliseconds timeout) {
  ATOLL_ASSIGN_OR_RETURN(endpoint_, net::Bind(socket_, "tcp://" + config_.bind_host + ":*"));
  events_ = std::make_unique<EventPublisher>(context_, "scheduler/" + island_);
  ATOLL_RETURN_IF_ERROR(events_->Connect(config_.events_in_endpoint));

  net::Requester rm(context_, config_.rm_endpoint);
  ATOLL_RETURN_IF_ERROR(rm.Connect());
  auto reply = rm.Call<proto::Ok>(proto::RegisterScheduler{island_, endpoint_}, timeout);
  return reply.status().WithContext("register with the RM at " + config_.rm_endpoint);
}

void SchedulerService::Run() {
  loop_.AddSocket("submit", socket_, [this] { OnRequest(); });
  loop_.Run();
}

void SchedulerService::OnRequest() {
  net::ServeRequests(socket_, *events_, "error.scheduler", [this](proto::Incoming& in) {
    if (in.header.kind() != proto::Kind::kSubmitProgram) {
      return InvalidArgument(fmt::format("the scheduler does not handle {} messages",
                                         proto::KindName(in.header.kind())));
    }
    return OnSubmit(in);
  });
}

namespace {

// A submitted subgraph must list each node's shards together, every shard once.
Status CheckSubgraph(const proto::SubmitProgram& program) {
  if (program.entries.empty()) return InvalidArgument("program has no entries");
  std::set<uint32_t> finished_nodes;
  std::set<uint32_t> shards_seen;
  for (size_t i = 0; i < program.entries.size(); ++i) {
    const auto& e = program.entries[i].entry;
    if (program.entries[i].executor.empty()) {
      return InvalidArgument(fmt::format("entry {} names no executor", i));
    }
    if (e.run_id != program.run_id) {
      return InvalidArgument(
          fmt::format("entry {} belongs to run {}, not {}", i, e.run_id, program.run_id));
    }
    if (e.num_shards == 0 || e.shard >= e.num_shards) {
      return InvalidArgument(fmt::format("entry {}: shard {} of {}", i, e.shard, e.num_shards));
    }
    const bool new_node = i == 0 || program.entries[i - 1].entry.node != e.node;
    if (new_node) {
      if (i > 0) finished_nodes.insert(program.entries[i - 1].entry.node);
      if (finished_nodes.count(e.node)) {
        return InvalidArgument(fmt::format("node {}'s shards are not listed together", e.node));
      }
      shards_seen.clear();
    }
    if (!shards_seen.insert(e.shard).second) {
      return InvalidArgument(fmt::format("node {} lists shard {} twice", e.node, e.shard));
    }
  }
  return Status::Ok();
}

}  // namespace

Status SchedulerService::OnSubmit(proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(proto::SubmitProgram program, in.header.As<proto::SubmitProgram>());
  ATOLL_RETURN_IF_ERROR(CheckSubgraph(program).WithContext("submit"));
  // Every gang gets the next place in the island's order; each executor then gets one
  // Dispatch with all of its entries, in that order.
  const uint64_t first_seq = next_gang_seq_;
  std::map<std::string, proto::Dispatch> per_executor;
  uint32_t gangs = 0;
  for (size_t i = 0; i < program.entries.size(); ++i) {
    auto& placed = program.entries[i];
    if (i == 0 || program.entries[i - 1].entry.node != placed.entry.node) {
      ++gangs;
      ++next_gang_seq_;
    }
    placed.entry.gang_seq = next_gang_seq_ - 1;
    per_executor[placed.executor].entries.push_back(std::move(placed.entry));
  }
  for (auto& [endpoint, dispatch] : per_executor) {
    // On failure, executors that already got their part fail the run on missing inputs;
    // the client hears the cause in the error reply.
    Status sent = [&]() -> Status {
      ATOLL_ASSIGN_OR_RETURN(zmq::socket_t * executor, executors_.Get(endpoint));
      return net::Send(*executor, nullptr, program.run_id, dispatch);
    }();
    ATOLL_RETURN_IF_ERROR(sent.WithContext("dispatch to executor " + endpoint));
  }
  events_->Publish("program.scheduled", {{"run", program.run_id},
                                         {"client", program.client_id},
                                         {"island", island_},
                                         {"first_gang", first_seq},
                                         {"gangs", uint64_t{gangs}},
                                         {"executors", uint64_t{per_executor.size()}}});
  return net::Reply(socket_, in, proto::SubmitReply{first_seq, gangs});
}

}  // namespace atl::scheduler
