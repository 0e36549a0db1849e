// The controller's registrations: executors (hosts and their devices), island schedulers
// and clients join; slices are placed; functions are registered and compiled; who owns what
// is looked up and told.
#include "services/rm/controller.h"

#include <algorithm>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/net/event_topics.h"
#include "common/service/advertise.h"
#include "services/rm/slice_quota.h"

namespace atl::rm {

namespace {

Clock::duration Lapse(const ControllerOptions& options) {
  return std::chrono::milliseconds(options.heartbeat_ms) * options.liveness;
}

std::chrono::milliseconds HeartbeatPeriod(const ControllerOptions& options) {
  return std::chrono::milliseconds(options.heartbeat_ms);
}

}  // namespace

ControllerOptions ControllerOptions::From(const ClusterConfig& config) {
  ControllerOptions options{config.heartbeat_ms, config.liveness, {}, config.quotas};
  for (const auto& island : config.islands) options.configured_islands.push_back(island.name);
  return options;
}

std::chrono::milliseconds LivenessCheckPeriod(uint32_t heartbeat_ms) {
  return std::max(std::chrono::milliseconds(heartbeat_ms) / 4, std::chrono::milliseconds(1));
}

Controller::Controller(ControllerOptions options, std::unique_ptr<PlacementPolicy> placement,
                       Clock::time_point start)
    : options_(std::move(options)),
      placement_(std::move(placement)),
      pending_(options_.compile_timeout),
      clients_heard_(Lapse(options_)),
      stall_guard_("the RM", LivenessCheckPeriod(options_.heartbeat_ms), HeartbeatPeriod(options_),
                   options_.liveness, start) {}

void Controller::Restore(RmState state, Clock::time_point now) {
  state_ = std::move(state);
  for (auto& [name, host] : state_.hosts) host.last_heard = host.store_last_heard = now;
  for (const auto& [island, endpoint] : state_.scheduler_by_island) {
    state_.schedulers[island].last_heard = now;
  }
  for (const auto& [id, client] : state_.clients) clients_heard_.Heard(id, now);
  stall_guard_.QuietUntil(now + kReconnectGrace);
}

Result<RmActions> Controller::RegisterExecutor(const proto::RegisterExecutor& req,
                                               const Caller& from, Clock::time_point now) {
  if (req.island.empty()) return InvalidArgument("executor " + req.host + " names no island");
  if (req.devices.empty()) return InvalidArgument("executor has no devices");
  ATOLL_RETURN_IF_ERROR(CheckAdvertised("its control endpoint", req.control_endpoint)
                            .WithContext("executor " + req.host));
  ATOLL_RETURN_IF_ERROR(
      CheckAdvertised("its data endpoint", req.data_endpoint).WithContext("executor " + req.host));
  ATOLL_RETURN_IF_ERROR(
      CheckAdvertised("its object store", req.store_endpoint).WithContext("executor " + req.host));
  auto known = state_.hosts.find(req.host);
  const bool rejoin = known != state_.hosts.end();
  if (rejoin && known->second.device_ids.size() != req.devices.size()) {
    return InvalidArgument(fmt::format("host {} re-registered with {} devices, had {}", req.host,
                                       req.devices.size(), known->second.device_ids.size()));
  }
  RmActions out;
  // An island the RM has not heard of is admitted with it: its devices are numbered now,
  // and slices there wait for its scheduler (CreateSlice).
  AdmitIsland(req.island, "executor " + req.host, out);
  Host& host = state_.hosts[req.host];
  // An executor registers when it starts: one the RM believes alive has restarted, and the
  // work the old one had queued is gone.
  if (rejoin && host.alive) {
    HostLost(host, "its executor restarted, and its queued work is gone", now, out);
  }
  host.name = req.host;
  host.island = req.island;
  host.drained = false;  // back, or a new process under a drained host's name
  host.control_endpoint = req.control_endpoint;
  host.data_endpoint = req.data_endpoint;
  host.store_endpoint = req.store_endpoint;
  if (!rejoin) host.store_last_heard = now;
  Reconnected(host, from.routing_id, out);
  host.last_heard = now;
  const bool back = rejoin && !host.alive;
  host.alive = true;
  if (!rejoin) {
    for (uint32_t i = 0; i < req.devices.size(); ++i) {
      const auto id = static_cast<uint32_t>(state_.devices.size());
      state_.devices.push_back(RmState::Device{id, host.name, i, req.devices[i], 0});
      host.device_ids.push_back(id);
    }
  }
  spdlog::info("executor {} ({} devices) {} island {}", host.name, host.device_ids.size(),
               rejoin ? "rejoined" : "joined", host.island);
  for (uint32_t id : host.device_ids) {
    out.Publish(topics::kDeviceRegistered,
                {{"device", uint64_t{id}},
                 {"host", host.name},
                 {"island", host.island},
                 {"kind", state_.devices[id].desc.kind},
                 {"memory_bytes", state_.devices[id].desc.memory_bytes}});
  }
  out.WriteStateNow();  // the Compiles below must follow the reply: none is held
  const std::vector<uint64_t> functions = rejoin ? FunctionsOn(host) : std::vector<uint64_t>{};
  out.Reply(proto::RegisterExecutorReply{host.device_ids, options_.heartbeat_ms, functions});
  // Its functions again, after the reply: the executor's registration call takes nothing but
  // its reply (a Compile ahead of it would be dropped as a stray reply); its loop reads these
  // next, before the schedulers hear that it is back.
  CompileAgainOn(host, functions, out);
  if (back) HostBack(host, out);
  return out;
}

Result<RmActions> Controller::RegisterScheduler(const proto::RegisterScheduler& req,
                                                const Caller& /*from*/, Clock::time_point now) {
  if (req.island.empty()) return InvalidArgument("a scheduler must name its island");
  ATOLL_RETURN_IF_ERROR(CheckAdvertised("its endpoint", req.endpoint)
                            .WithContext("the scheduler of island " + req.island));
  RmActions out;
  AdmitIsland(req.island, "its scheduler at " + req.endpoint, out);
  auto was = state_.scheduler_by_island.find(req.island);
  const bool moved = was != state_.scheduler_by_island.end() && was->second != req.endpoint;
  const bool known = state_.schedulers.count(req.island) > 0;
  // A scheduler registers when it starts: one the RM believes alive has restarted, and the
  // gangs the old one had queued are gone.
  if (known && SchedulerAlive(req.island)) {
    SchedulerLost(req.island, "it restarted, and the runs it had queued are gone", out);
  }
  state_.scheduler_by_island[req.island] = req.endpoint;
  state_.schedulers[req.island].last_heard = now;
  spdlog::info("scheduler of {} at {}", req.island, req.endpoint);
  out.Publish(topics::kIslandScheduler, {{"island", req.island}, {"endpoint", req.endpoint}});
  if (known) SchedulerBack(req.island, out);
  if (moved) {
    // Clients submit to the endpoint their slices name: they learn the new one.
    for (const auto& [id, slice] : state_.slices) {
      if (slice.island == req.island) {
        TellSliceMoved(slice, "the scheduler of island " + req.island + " moved to " + req.endpoint,
                       out);
      }
    }
  }
  out.SaveState();
  out.Reply(proto::Ok{});
  return out;
}

void Controller::AdmitIsland(const std::string& island, const std::string& by,
                             RmActions& out) const {
  const std::vector<std::string> known = IslandNames(state_, options_.configured_islands);
  if (std::find(known.begin(), known.end(), island) != known.end()) return;
  spdlog::info("island {} joined at run time ({})", island, by);
  out.Publish(topics::kIslandJoined, {{"island", island}, {"by", by}});
}

Result<RmActions> Controller::HelloClient(const proto::HelloClient& req, const Caller& from,
                                          Clock::time_point now) {
  RmActions out;
  const uint64_t id = state_.next_client_id++;
  state_.clients[id] = {req.name, from.routing_id, from.sender.user_id};
  clients_heard_.Heard(id, now);
  // Told before the client hears its id, which it needs to name itself to them: a store or
  // scheduler hears the notice first unless its queue holds it back (it then asks).
  TellOwners({{id}, {from.sender.user_id}, {}, {}, {}, {}, false, {}}, out);
  out.Publish(topics::kClientConnected, {{"client", id}, {"name", req.name}});
  out.SaveState();
  out.Reply(proto::HelloClientReply{id, options_.heartbeat_ms});
  return out;
}

Result<RmActions> Controller::Goodbye(const proto::Goodbye& req, const Caller& /*from*/,
                                      Clock::time_point /*now*/) {
  ATOLL_RETURN_IF_ERROR(RequireKnownClient(req.client_id, "say goodbye"));
  RmActions out;
  DropClient(req.client_id, "goodbye", out);
  out.Reply(proto::Ok{});
  return out;
}

void Controller::DropClient(uint64_t client_id, const std::string& why, RmActions& out) {
  state_.clients.erase(client_id);
  clients_heard_.Forget(client_id);
  for (auto it = state_.slices.begin(); it != state_.slices.end();) {
    if (it->second.client != client_id) {
      ++it;
      continue;
    }
    for (uint32_t d : it->second.device_ids) state_.devices[d].slices--;
    out.Publish(topics::kSliceReleased, {{"slice", it->first}, {"client", client_id}});
    it = state_.slices.erase(it);
  }
  std::erase_if(state_.functions, [&](const auto& kv) { return kv.second.client == client_id; });
  if (gone_reasons_.size() >= kMaxGoneReasons) gone_reasons_.clear();
  gone_reasons_[client_id] = why;
  TellOwners({{}, {}, {}, {}, {client_id}, {why}, false, {}}, out);
  spdlog::info("client {} gone ({})", client_id, why);
  out.Publish(topics::kClientGone, {{"client", client_id}, {"reason", why}});
  out.SaveState();
}

Result<RmActions> Controller::CreateSlice(const proto::CreateSlice& req, const Caller& from,
                                          Clock::time_point /*now*/) {
  ATOLL_RETURN_IF_ERROR(RequireKnownClient(req.client_id, "create a slice"));
  state_.clients.at(req.client_id).routing_id = from.routing_id;
  ATOLL_RETURN_IF_ERROR(CheckSliceQuota(state_, options_.quotas, req.client_id, req.num_devices));
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
    return atl::Status(placed.status().code(), why).WithContext("create slice");
  }
  const std::string island = state_.hosts.at(state_.devices[placed->front()].host).island;
  Slice slice{state_.next_slice_id++, req.client_id, island, *placed};
  for (uint32_t d : slice.device_ids) state_.devices[d].slices++;
  state_.slices[slice.id] = slice;
  RmActions out;
  out.Publish(topics::kSliceCreated, {{"slice", slice.id},
                                      {"client", slice.client},
                                      {"island", island},
                                      {"devices", fmt::format("{}", fmt::join(*placed, ","))}});
  out.SaveState();
  out.Reply(DescribeSlice(slice));
  return out;
}

proto::SliceInfo Controller::DescribeSlice(const Slice& slice) const {
  proto::SliceInfo info{
      slice.id, slice.island, state_.scheduler_by_island.at(slice.island), {}, slice.mapping};
  for (uint32_t id : slice.device_ids) {
    const RmState::Device& d = state_.devices[id];
    const Host& h = state_.hosts.at(d.host);
    info.devices.push_back(
        {id, h.name, d.local_index, h.control_endpoint, h.data_endpoint, h.store_endpoint});
  }
  return info;
}

void Controller::TellSliceMoved(const Slice& slice, const std::string& reason,
                                RmActions& out) const {
  auto client = state_.clients.find(slice.client);
  if (client == state_.clients.end()) return;
  out.Send(client->second.routing_id, 0, proto::SliceRemapped{DescribeSlice(slice), reason},
           fmt::format("client {}", slice.client));
}

bool Controller::SchedulerAlive(const std::string& island) const {
  auto it = state_.schedulers.find(island);
  return it != state_.schedulers.end() && it->second.alive;
}

atl::Status Controller::MayActFor(const proto::Peer& sender, uint64_t client_id,
                                  std::string_view action) const {
  auto it = state_.clients.find(client_id);
  if (it == state_.clients.end()) return Status::Ok();
  return proto::RequireClient(sender, client_id, it->second.user_id, action);
}

atl::Status Controller::RequireKnownClient(uint64_t client_id, std::string_view action) const {
  if (state_.clients.count(client_id) == 0) {
    auto gone = gone_reasons_.find(client_id);
    if (gone != gone_reasons_.end()) {
      return NotFound(fmt::format("{}: client {} has left the cluster ({}); connect again", action,
                                  client_id, gone->second));
    }
    return NotFound(
        fmt::format("{}: client {} is unknown; say HelloClient first", action, client_id));
  }
  return Status::Ok();
}

proto::ClusterStatus Controller::DescribeCluster() const {
  proto::ClusterStatus status;
  for (const std::string& island : IslandNames(state_, options_.configured_islands)) {
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
        const RmState::Device& d = state_.devices[id];
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
  return status;
}

}  // namespace atl::rm
