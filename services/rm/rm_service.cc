#include "services/rm/rm_service.h"

#include <algorithm>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/net/request_server.h"
#include "common/net/sent_counters.h"
#include "common/net/transport.h"
#include "common/service/advertise.h"
#include "services/rm/elastic_core.h"
#include "services/rm/slice_quota.h"

namespace atl::rm {

namespace {

std::chrono::milliseconds Heartbeat(const ClusterConfig& config) {
  return std::chrono::milliseconds(config.heartbeat_ms);
}

// Four checks per heartbeat period: a silent service is declared lost at most a quarter
// period late.
std::chrono::milliseconds LivenessCheckPeriod(const ClusterConfig& config) {
  return std::max(Heartbeat(config) / 4, std::chrono::milliseconds(1));
}

}  // namespace

RmService::RmService(zmq::context_t& context, ClusterConfig config, std::string state_file)
    : context_(context),
      config_(std::move(config)),
      state_file_(std::move(state_file)),
      socket_(net::MakeSocket(context, zmq::socket_type::router)),
      proxy_(context),
      placement_(MakeSpreadEvenlyPolicy()),
      stall_guard_("the RM", LivenessCheckPeriod(config_), Heartbeat(config_), config_.liveness),
      stores_(context),
      schedulers_(context) {
  for (const auto& island : config_.islands) configured_islands_.push_back(island.name);
}

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
  loop_.AddTimer("liveness", LivenessCheckPeriod(config_), [this] { CheckLiveness(); });
  loop_.AddTimer("net.stats", Heartbeat(config_),
                 [this] { events_->Publish("net.stats", net::SentCountFields()); });
  loop_.Run();
  FlushState();
  proxy_.Stop();
}

void RmService::OnRequest() {
  net::ServeRequests(socket_, *events_, "error.rm", rejected_,
                     [this](proto::Incoming& in) { return Handle(in); });
  FlushState();
}

Status RmService::Handle(proto::Incoming& in) {
  switch (in.header.kind()) {
    case proto::Kind::kRegisterExecutor:
    case proto::Kind::kRegisterScheduler:
    case proto::Kind::kLookupOwners:
    case proto::Kind::kDrainHost:
    case proto::Kind::kOk:
    case proto::Kind::kError:
      ATOLL_RETURN_IF_ERROR(proto::RequireMember(
          in.sender, fmt::format("send the RM {}", proto::KindName(in.header.kind()))));
      break;
    default:
      break;
  }
  switch (in.header.kind()) {
    case proto::Kind::kRegisterExecutor:
      return OnRegisterExecutor(in);
    case proto::Kind::kHeartbeat:
      return OnHeartbeat(in);
    case proto::Kind::kRegisterScheduler:
      return OnRegisterScheduler(in);
    case proto::Kind::kHelloClient:
      return OnHelloClient(in);
    case proto::Kind::kGoodbye:
      return OnGoodbye(in);
    case proto::Kind::kCreateSlice:
      return OnCreateSlice(in);
    case proto::Kind::kRegisterFunction:
      return OnRegisterFunction(in);
    case proto::Kind::kGetClusterStatus:
      return OnClusterStatus(in);
    case proto::Kind::kLookupOwners:
      return OnLookupOwners(in);
    case proto::Kind::kDrainHost:
      return OnDrainHost(in);
    case proto::Kind::kOk:
    case proto::Kind::kError:
      return OnCompileReply(in);
    default:
      return InvalidArgument(
          fmt::format("the RM does not handle {} messages", proto::KindName(in.header.kind())));
  }
}

Status RmService::OnRegisterExecutor(proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::RegisterExecutor>());
  if (req.island.empty()) return InvalidArgument("executor " + req.host + " names no island");
  if (req.devices.empty()) return InvalidArgument("executor has no devices");
  ATOLL_RETURN_IF_ERROR(CheckAdvertised("its control endpoint", req.control_endpoint)
                            .WithContext("executor " + req.host));
  ATOLL_RETURN_IF_ERROR(
      CheckAdvertised("its data endpoint", req.data_endpoint).WithContext("executor " + req.host));
  ATOLL_RETURN_IF_ERROR(
      CheckAdvertised("its object store", req.store_endpoint).WithContext("executor " + req.host));
  // An island the RM has not heard of is admitted with it: its devices are numbered now,
  // and slices there wait for its scheduler (OnCreateSlice).
  AdmitIsland(req.island, "executor " + req.host);

  Host& host = state_.hosts[req.host];
  const bool rejoin = !host.name.empty();
  if (rejoin && host.device_ids.size() != req.devices.size()) {
    return InvalidArgument(fmt::format("host {} re-registered with {} devices, had {}", req.host,
                                       req.devices.size(), host.device_ids.size()));
  }
  // An executor registers when it starts: one the RM believes alive has restarted, and the
  // work the old one had queued is gone.
  if (rejoin && host.alive) OnHostLost(host, "its executor restarted, and its queued work is gone");
  host.name = req.host;
  host.island = req.island;
  host.drained = false;  // back, or a new process under a drained host's name
  host.control_endpoint = req.control_endpoint;
  host.data_endpoint = req.data_endpoint;
  host.store_endpoint = req.store_endpoint;
  if (!rejoin) host.store_last_heard = Clock::now();
  Reconnected(host, in);
  host.last_heard = Clock::now();
  const bool back = rejoin && !host.alive;
  host.alive = true;
  if (!rejoin) {
    for (uint32_t i = 0; i < req.devices.size(); ++i) {
      const auto id = static_cast<uint32_t>(state_.devices.size());
      state_.devices.push_back(Device{id, host.name, i, req.devices[i], 0});
      host.device_ids.push_back(id);
    }
  }
  spdlog::info("executor {} ({} devices) {} island {}", host.name, host.device_ids.size(),
               rejoin ? "rejoined" : "joined", host.island);
  for (uint32_t id : host.device_ids) {
    events_->Publish("device.registered", {{"device", uint64_t{id}},
                                           {"host", host.name},
                                           {"island", host.island},
                                           {"kind", state_.devices[id].desc.kind},
                                           {"memory_bytes", state_.devices[id].desc.memory_bytes}});
  }
  SaveStateNow();  // the Compiles below must follow the reply: none is held
  const std::vector<uint64_t> functions = rejoin ? FunctionsOn(host) : std::vector<uint64_t>{};
  Status replied = net::Reply(
      socket_, in, proto::RegisterExecutorReply{host.device_ids, config_.heartbeat_ms, functions});
  // Its functions again, after the reply: the executor's registration call takes nothing but
  // its reply (a Compile ahead of it would be dropped as a stray reply); its loop reads these
  // next, before the schedulers hear that it is back.
  CompileAgainOn(host, functions);
  if (back) OnHostBack(host);
  return replied;
}

Status RmService::OnHeartbeat(proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::Heartbeat>());
  if (req.role != proto::Heartbeat::kClient) {
    ATOLL_RETURN_IF_ERROR(proto::RequireMember(in.sender, "heartbeat as a service"));
    return OnServiceHeartbeat(req, in);
  }
  ATOLL_ASSIGN_OR_RETURN(const uint64_t id, proto::HeartbeatClientId(req));
  auto it = state_.clients.find(id);
  if (it == state_.clients.end()) {
    // Routine, not a fault: a heartbeat in flight (on its own connection) when the client's
    // Goodbye came, or one from a client dropped already, which learns it at its next call.
    spdlog::debug("heartbeat of client {}, which is gone", id);
    return Status::Ok();
  }
  ATOLL_RETURN_IF_ERROR(CheckClient(in, id, "heartbeat"));
  it->second.last_heard = Clock::now();
  return Status::Ok();
}

Status RmService::OnRegisterScheduler(proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::RegisterScheduler>());
  if (req.island.empty()) return InvalidArgument("a scheduler must name its island");
  ATOLL_RETURN_IF_ERROR(CheckAdvertised("its endpoint", req.endpoint)
                            .WithContext("the scheduler of island " + req.island));
  AdmitIsland(req.island, "its scheduler at " + req.endpoint);
  auto was = state_.scheduler_by_island.find(req.island);
  const bool moved = was != state_.scheduler_by_island.end() && was->second != req.endpoint;
  const bool known = state_.schedulers.count(req.island) > 0;
  // A scheduler registers when it starts: one the RM believes alive has restarted, and the
  // gangs the old one had queued are gone.
  if (known && SchedulerAlive(req.island)) {
    OnSchedulerLost(req.island, "it restarted, and the runs it had queued are gone");
  }
  state_.scheduler_by_island[req.island] = req.endpoint;
  state_.schedulers[req.island].last_heard = Clock::now();
  spdlog::info("scheduler of {} at {}", req.island, req.endpoint);
  events_->Publish("island.scheduler", {{"island", req.island}, {"endpoint", req.endpoint}});
  if (known) OnSchedulerBack(req.island);
  if (moved) {
    // Clients submit to the endpoint their slices name: they learn the new one.
    for (const auto& [id, slice] : state_.slices) {
      if (slice.island == req.island) {
        TellSliceMoved(slice,
                       "the scheduler of island " + req.island + " moved to " + req.endpoint);
      }
    }
  }
  SaveState();
  return Answer(in, proto::Ok{});
}

void RmService::AdmitIsland(const std::string& island, const std::string& by) {
  const std::vector<std::string> known = IslandNames(state_, configured_islands_);
  if (std::find(known.begin(), known.end(), island) != known.end()) return;
  spdlog::info("island {} joined at run time ({})", island, by);
  events_->Publish("island.joined", {{"island", island}, {"by", by}});
}

Status RmService::OnHelloClient(proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::HelloClient>());
  const uint64_t id = state_.next_client_id++;
  state_.clients[id] = {req.name, Clock::now(), RoutingId(in), in.sender.user_id};
  TellClientOwner(id);
  events_->Publish("client.connected", {{"client", id}, {"name", req.name}});
  SaveState();
  return Answer(in, proto::HelloClientReply{id, config_.heartbeat_ms});
}

Status RmService::OnGoodbye(proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::Goodbye>());
  ATOLL_RETURN_IF_ERROR(CheckClient(in, req.client_id, "say goodbye"));
  DropClient(req.client_id, "goodbye");
  return Answer(in, proto::Ok{});
}

void RmService::DropClient(uint64_t client_id, const std::string& why) {
  state_.clients.erase(client_id);
  for (auto it = state_.slices.begin(); it != state_.slices.end();) {
    if (it->second.client != client_id) {
      ++it;
      continue;
    }
    for (uint32_t d : it->second.device_ids) state_.devices[d].slices--;
    events_->Publish("slice.released", {{"slice", it->first}, {"client", client_id}});
    it = state_.slices.erase(it);
  }
  std::erase_if(state_.functions, [&](const auto& kv) { return kv.second.client == client_id; });
  if (gone_reasons_.size() >= kMaxGoneReasons) gone_reasons_.clear();
  gone_reasons_[client_id] = why;
  TellClientGone(client_id, why);
  spdlog::info("client {} gone ({})", client_id, why);
  events_->Publish("client.gone", {{"client", client_id}, {"reason", why}});
  SaveState();
}

Status RmService::OnCreateSlice(proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::CreateSlice>());
  ATOLL_RETURN_IF_ERROR(CheckClient(in, req.client_id, "create a slice"));
  state_.clients.at(req.client_id).routing_id = RoutingId(in);
  ATOLL_RETURN_IF_ERROR(CheckSliceQuota(state_, config_.quotas, req.client_id, req.num_devices));
  if (!req.island.empty() && !SchedulerAlive(req.island)) {
    return Unavailable("island '" + req.island + "' has no live scheduler" +
                       (state_.scheduler_by_island.count(req.island)
                            ? " (it was lost; slices wait for it to come back)"
                            : " yet"));
  }
  // Devices of islands without a live scheduler could run nothing.
  std::vector<DeviceLoad> loads = Loads(state_);
  std::set<std::string> unscheduled;  // islands left out for that alone
  for (auto& load : loads) {
    if (load.alive && !SchedulerAlive(load.island)) {
      unscheduled.insert(load.island);
      load.alive = false;
    }
  }
  auto placed = placement_->Place({req.num_devices, req.island, req.kind}, loads);
  if (!placed.ok()) {
    std::string why = placed.status().message();
    for (const std::string& island : unscheduled) {
      why += "; island " + island + " has live devices but no live scheduler";
    }
    return Status(placed.status().code(), why).WithContext("create slice");
  }
  const std::string island = state_.hosts.at(state_.devices[placed->front()].host).island;
  Slice slice{state_.next_slice_id++, req.client_id, island, *placed};
  for (uint32_t d : slice.device_ids) state_.devices[d].slices++;
  state_.slices[slice.id] = slice;
  events_->Publish("slice.created", {{"slice", slice.id},
                                     {"client", slice.client},
                                     {"island", island},
                                     {"devices", fmt::format("{}", fmt::join(*placed, ","))}});
  SaveState();
  return Answer(in, DescribeSlice(slice));
}

void RmService::Reconnected(Host& host, const proto::Incoming& in) {
  // The executor's connection may be new (the RM restarted): Compile goes where it is.
  host.routing_id = RoutingId(in);
  zmq::message_t routing(host.routing_id.data(), host.routing_id.size());
  for (auto& [rm_request, compile] : std::exchange(host.held, {})) {
    Status sent = net::Send(socket_, &routing, rm_request, compile);
    if (!sent.ok()) spdlog::warn("compile on {}: {}", host.name, sent.ToString());
  }
}

proto::SliceInfo RmService::DescribeSlice(const Slice& slice) const {
  proto::SliceInfo info{
      slice.id, slice.island, state_.scheduler_by_island.at(slice.island), {}, slice.mapping};
  for (uint32_t id : slice.device_ids) {
    const Device& d = state_.devices[id];
    const Host& h = state_.hosts.at(d.host);
    info.devices.push_back(
        {id, h.name, d.local_index, h.control_endpoint, h.data_endpoint, h.store_endpoint});
  }
  return info;
}

Status RmService::OnRegisterFunction(proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::RegisterFunction>());
  ATOLL_RETURN_IF_ERROR(CheckClient(in, req.client_id, "register a function"));
  auto slice_it = state_.slices.find(req.slice_id);
  if (slice_it == state_.slices.end()) {
    return NotFound(fmt::format("slice {} is unknown", req.slice_id));
  }
  const Slice& slice = slice_it->second;
  if (slice.client != req.client_id) {
    return FailedPrecondition(fmt::format("slice {} belongs to client {}, not {}", slice.id,
                                          slice.client, req.client_id));
  }
  const auto shards = static_cast<int>(slice.device_ids.size());
  Status valid = ir::Validate(req.function, shards);
  if (!valid.ok()) return valid.WithContext("function '" + req.function.name + "'");

  if (auto client = state_.clients.find(req.client_id); client != state_.clients.end()) {
    client->second.routing_id = RoutingId(in);
  }
  const uint64_t function_id = state_.next_function_id++;
  state_.functions[function_id] = Function{req.client_id, slice.id, req.function};
  TellFunctionOwner(function_id, slice.island);
  // Background compilation: every executor hosting a device of the slice gets the
  // function now, so the first call finds it ready. The client hears back once all did.
  const uint64_t rm_request = next_request_id_++;
  pending_[rm_request] = {RoutingId(in), in.header.request_id(), function_id, 0,
                          Clock::now() + kCompileTimeout};
  auto hosts = SendCompile(rm_request, function_id, slice, req.function);
  if (!hosts.ok()) {
    FinishRegistration(rm_request, hosts.status());
  } else {
    pending_.at(rm_request).acks_missing = *hosts;
  }
  return Status::Ok();  // the client is answered once every executor compiled
}

Result<size_t> RmService::SendCompile(uint64_t rm_request, uint64_t function_id, const Slice& slice,
                                      const ir::FunctionDef& def, const std::string& only_host) {
  std::set<std::string> hosts;
  proto::Compile compile{
      function_id, static_cast<uint32_t>(slice.device_ids.size()), def, {}, slice.mapping};
  for (uint32_t d : slice.device_ids) {
    hosts.insert(state_.devices[d].host);
    compile.shard_endpoints.push_back(state_.hosts.at(state_.devices[d].host).data_endpoint);
  }
  if (!only_host.empty()) hosts = {only_host};
  for (const auto& name : hosts) {
    Host& h = state_.hosts.at(name);
    if (h.routing_id.empty()) {
      h.held.emplace_back(rm_request, compile);
      continue;
    }
    zmq::message_t routing(h.routing_id.data(), h.routing_id.size());
    ATOLL_RETURN_IF_ERROR(
        net::Send(socket_, &routing, rm_request, compile).WithContext("compile on " + name));
  }
  return hosts.size();
}

std::vector<uint64_t> RmService::FunctionsOn(const Host& host) const {
  std::vector<uint64_t> functions;
  for (const auto& [function_id, f] : state_.functions) {
    auto it = state_.slices.find(f.slice);
    if (it == state_.slices.end()) continue;
    const Slice& slice = it->second;
    if (std::any_of(slice.device_ids.begin(), slice.device_ids.end(),
                    [&](uint32_t d) { return state_.devices[d].host == host.name; })) {
      functions.push_back(function_id);
    }
  }
  return functions;
}

void RmService::CompileAgainOn(const Host& host, const std::vector<uint64_t>& functions) {
  const uint64_t rm_request = next_request_id_++;  // no registration waits on it
  for (uint64_t function_id : functions) {
    const Function& f = state_.functions.at(function_id);
    auto sent = SendCompile(rm_request, function_id, state_.slices.at(f.slice), f.def, host.name);
    if (!sent.ok())
      spdlog::warn("compile function {} again: {}", function_id, sent.status().ToString());
  }
}

// An executor's answer to Compile. Never answered itself: it is a reply.
Status RmService::OnCompileReply(proto::Incoming& in) {
  Status error;
  if (in.header.kind() == proto::Kind::kError) {
    auto err = in.header.As<proto::Error>();
    error = err.ok() ? proto::FromError(*err) : err.status();
  }
  if (auto it = pending_.find(in.header.request_id()); it != pending_.end()) {
    if (!error.ok() || --it->second.acks_missing == 0) FinishRegistration(it->first, error);
  } else if (auto r = remaps_.find(in.header.request_id()); r != remaps_.end()) {
    if (!error.ok() || --r->second.acks_missing == 0) FinishRemap(r->first, error);
  }
  return Status::Ok();  // late: the registration or remap already finished
}

void RmService::FinishRegistration(uint64_t rm_request_id, const Status& status) {
  auto it = pending_.find(rm_request_id);
  if (it == pending_.end()) return;
  PendingRegistration p = std::move(it->second);
  pending_.erase(it);
  zmq::message_t routing(p.client_routing_id.data(), p.client_routing_id.size());
  if (!status.ok()) {
    state_.functions.erase(p.function_id);
    events_->Publish("error.rm", {{"error", status.ToString()}});
    (void)net::Send(socket_, &routing, p.client_request_id,
                    proto::ToError(status.WithContext("compile")));
    return;
  }
  auto f = state_.functions.find(p.function_id);
  if (f == state_.functions.end()) return;  // its client left while it compiled
  SaveFunction(p.function_id, f->second);
  events_->Publish(
      "function.registered",
      {{"function", p.function_id}, {"name", f->second.def.name}, {"slice", f->second.slice}});
  (void)net::Send(socket_, &routing, p.client_request_id,
                  proto::RegisterFunctionReply{p.function_id});
}

Status RmService::OnClusterStatus(proto::Incoming& in) {
  proto::ClusterStatus status;
  for (const std::string& island : IslandNames(state_, configured_islands_)) {
    proto::IslandStatus is{island, "", {}, SchedulerAlive(island)};
    if (auto s = state_.schedulers.find(island); s != state_.schedulers.end()) {
      is.scheduler_stall_us = s->second.stall_us;
    }
    if (auto s = state_.scheduler_by_island.find(island); s != state_.scheduler_by_island.end()) {
      is.scheduler_endpoint = s->second;
    }
    for (const auto& [name, h] : state_.hosts) {
      if (h.island != island) continue;
      proto::HostStatus hs{name, h.alive,       h.control_endpoint,  h.store_endpoint,
                           {},   h.store_alive, h.executor_stall_us, h.store_stall_us};
      for (uint32_t id : h.device_ids) {
        const Device& d = state_.devices[id];
        hs.devices.push_back({id, d.desc.kind, d.desc.memory_bytes, d.slices});
      }
      is.hosts.push_back(std::move(hs));
    }
    status.islands.push_back(std::move(is));
  }
  for (const auto& [id, s] : state_.slices) {
    status.slices.push_back({id, s.client, s.island, s.device_ids});
  }
  status.functions = static_cast<uint32_t>(state_.functions.size());
  status.clients = static_cast<uint32_t>(state_.clients.size());
  status.events_in = events_in_.advertised;
  status.events_out = events_out_.advertised;
  status.rm_stall_us = loop_.LongestStallMicros();
  return net::Reply(socket_, in, status);
}

Status RmService::CheckClient(const proto::Incoming& in, uint64_t client_id,
                              std::string_view action) const {
  auto it = state_.clients.find(client_id);
  if (it == state_.clients.end()) {
    auto gone = gone_reasons_.find(client_id);
    if (gone != gone_reasons_.end()) {
      return NotFound(fmt::format("{}: client {} has left the cluster ({}); connect again", action,
                                  client_id, gone->second));
    }
    return NotFound(
        fmt::format("{}: client {} is unknown; say HelloClient first", action, client_id));
  }
  return proto::RequireClient(in.sender, client_id, it->second.user_id, action);
}

}  // namespace atl::rm
