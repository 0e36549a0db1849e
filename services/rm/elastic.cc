// The RM's elasticity: what a lost host (its executor silent for `liveness` heartbeats)
// changes. Executors stop waiting for its tuples and partials, island schedulers fail the
// queued gangs that need it, its object store fails the outputs its executor never wrote,
// and every slice with a virtual device on it is remapped onto live devices of the same
// island; once the slice's functions are compiled there, its client is told
// (SliceRemapped) and its next run is lowered onto the new mapping.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "services/rm/elastic_core.h"
#include "services/rm/rm_service.h"

namespace atl::rm {

namespace {

// "device 1 on host h1 was" / "devices 2,3 on host h1 were": what a lost host took away.
std::string DevicesOn(const std::vector<uint32_t>& ids, const std::string& host) {
  return fmt::format("{} {} on host {} {}", ids.size() == 1 ? "device" : "devices",
                     fmt::join(ids, ","), host, ids.size() == 1 ? "was" : "were");
}

}  // namespace

void RmService::OnHostLost(Host& host, const std::string& why) {
  host.alive = false;
  const std::string reason = fmt::format("{} lost: {}", DevicesOn(host.device_ids, host.name), why);
  spdlog::warn("{}", reason);
  BroadcastHostChanged(host, /*lost=*/true, reason);
  TellClients({proto::Heartbeat::kExecutor, host.name, host.control_endpoint, true, reason});
  events_->Publish("host.lost", {{"host", host.name}, {"island", host.island}, {"reason", reason}});
  RemapSlicesOff(host, reason);
}

void RmService::OnHostBack(Host& host) {
  host.alive = true;
  spdlog::info("executor {} is back", host.name);
  BroadcastHostChanged(host, /*lost=*/false, "");
  TellClients({proto::Heartbeat::kExecutor, host.name, host.control_endpoint, false, ""});
  events_->Publish("host.back", {{"host", host.name}});
}

void RmService::BroadcastHostChanged(const Host& changed, bool lost, const std::string& reason) {
  const proto::HostChanged message{changed.name, changed.control_endpoint, changed.device_ids, lost,
                                   reason,       changed.data_endpoint};
  auto warn = [&](const std::string& to, const Status& sent) {
    if (!sent.ok()) spdlog::warn("HostChanged to {}: {}", to, sent.ToString());
  };
  for (const auto& [name, h] : state_.hosts) {
    if (!h.alive || name == changed.name) continue;
    zmq::message_t routing(h.routing_id.data(), h.routing_id.size());
    warn(name, net::Send(socket_, &routing, 0, message));
  }
  // When only the executor died, its host's store lives on holding outputs the executor
  // reserved but will never write: told, it fails them so that their readers stop waiting.
  if (lost) {
    auto store = stores_.Get(changed.store_endpoint);
    warn(changed.store_endpoint,
         store.ok() ? net::Send(**store, nullptr, 0, message) : store.status());
  }
  TellSchedulers(message);
}

void RmService::TellSchedulers(const proto::HostChanged& message) {
  // Only the host's own island places work on it, but every scheduler is told: the notice
  // is small and a scheduler ignores executors it never sends to.
  for (const auto& [island, endpoint] : state_.scheduler_by_island) {
    auto scheduler = schedulers_.Get(endpoint);
    Status sent = scheduler.ok() ? net::Send(**scheduler, nullptr, 0, message) : scheduler.status();
    if (!sent.ok()) spdlog::warn("HostChanged to the scheduler of {}: {}", island, sent.ToString());
  }
}

void RmService::RemapSlicesOff(const Host& host, const std::string& reason, uint64_t drain) {
  for (auto& [id, slice] : state_.slices) {
    auto moved = RemapSliceOff(state_, id, host.name, *placement_);
    if (!moved.ok()) {
      // The slice keeps its lost devices: its runs fail naming them until the host is back.
      const std::string error =
          moved.status().WithContext(fmt::format("remap slice {}", id)).ToString();
      spdlog::warn("{}", error);
      events_->Publish("error.rm", {{"slice", id}, {"error", error}});
      if (drain != 0) drains_.at(drain).reply.kept.push_back(id);
      continue;
    }
    if (!*moved) continue;
    if (drain != 0) {
      drains_.at(drain).reply.moved.push_back(id);
      drains_.at(drain).remaps_missing++;
    }

    // The slice's functions are compiled on the new mapping (every host: the shard
    // endpoints that collectives meet at changed) before the client may use it.
    const uint64_t rm_request = next_request_id_++;
    size_t acks = 0;
    Status sent;
    for (const auto& [function_id, f] : state_.functions) {
      if (f.slice != id || !sent.ok()) continue;
      auto hosts = SendCompile(rm_request, function_id, slice, f.def);
      if (hosts.ok()) acks += *hosts;
      sent = hosts.status();
    }
    remaps_[rm_request] = {id, reason, acks, Clock::now() + kCompileTimeout, drain};
    if (!sent.ok() || acks == 0) FinishRemap(rm_request, sent);
  }
  SaveState();
}

void RmService::FinishRemap(uint64_t rm_request_id, const Status& status) {
  auto it = remaps_.find(rm_request_id);
  if (it == remaps_.end()) return;
  const PendingRemap remap = std::move(it->second);
  remaps_.erase(it);
  auto slice = state_.slices.find(remap.slice);
  if (slice == state_.slices.end()) {  // its client left meanwhile
    if (remap.drain != 0) DrainStepDone(remap.drain);
    return;
  }
  if (!status.ok()) {
    events_->Publish(
        "error.rm",
        {{"slice", remap.slice},
         {"error", status
                       .WithContext(fmt::format("compile slice {}'s functions on its new devices",
                                                remap.slice))
                       .ToString()}});
  }
  TellSliceMoved(slice->second, remap.reason);
  spdlog::info("slice {} remapped onto devices {}", remap.slice,
               fmt::join(slice->second.device_ids, ","));
  events_->Publish("slice.remapped",
                   {{"slice", remap.slice},
                    {"client", slice->second.client},
                    {"island", slice->second.island},
                    {"devices", fmt::format("{}", fmt::join(slice->second.device_ids, ","))},
                    {"reason", remap.reason}});
  if (remap.drain != 0) DrainStepDone(remap.drain);
}

Status RmService::OnDrainHost(proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::DrainHost>());
  auto it = state_.hosts.find(req.host);
  if (it == state_.hosts.end()) return NotFound("host '" + req.host + "' is unknown");
  Host& host = it->second;
  host.drained = true;  // before the remaps: none of its devices may take a slice over
  const std::string reason = DevicesOn(host.device_ids, host.name) + " drained";
  spdlog::info("{}", reason);
  const uint64_t drain = next_request_id_++;
  // One step for this pass, so that remaps finishing within it cannot answer early.
  drains_[drain] = {RoutingId(in), in.header.request_id(), 1, {}};
  RemapSlicesOff(host, reason, drain);
  const proto::DrainHostReply& reply = drains_.at(drain).reply;
  events_->Publish("host.drained", {{"host", host.name},
                                    {"island", host.island},
                                    {"moved", fmt::format("{}", fmt::join(reply.moved, ","))},
                                    {"kept", fmt::format("{}", fmt::join(reply.kept, ","))}});
  DrainStepDone(drain);
  return Status::Ok();  // answered once every moved slice's client was told
}

void RmService::DrainStepDone(uint64_t drain) {
  auto it = drains_.find(drain);
  if (it == drains_.end() || --it->second.remaps_missing > 0) return;
  const PendingDrain done = std::move(it->second);
  drains_.erase(it);
  zmq::message_t routing(done.routing_id.data(), done.routing_id.size());
  Status sent = net::Send(socket_, &routing, done.request_id, done.reply);
  if (!sent.ok()) spdlog::warn("DrainHostReply: {}", sent.ToString());
}

void RmService::TellSliceMoved(const Slice& slice, const std::string& reason) {
  auto client = state_.clients.find(slice.client);
  if (client == state_.clients.end()) return;
  const std::string& to = client->second.routing_id;
  zmq::message_t routing(to.data(), to.size());
  Status sent = net::Send(socket_, &routing, 0, proto::SliceRemapped{DescribeSlice(slice), reason});
  if (!sent.ok()) spdlog::warn("SliceRemapped to client {}: {}", slice.client, sent.ToString());
}

}  // namespace atl::rm
