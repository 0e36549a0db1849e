// The controller's elasticity: what a lost host (its executor silent for `liveness`
// heartbeats, or restarted) changes. Executors stop waiting for its tuples and partials,
// island schedulers fail the queued gangs that need it, its object store fails the outputs
// its executor never wrote, and every slice with a virtual device on it is remapped onto
// live devices of the same island; once the slice's functions are compiled there, its
// client is told (SliceRemapped) and its next run is lowered onto the new mapping. A
// drained host (`atoll stop`) has its slices moved off the same way before it leaves.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/net/event_topics.h"
#include "services/rm/controller.h"
#include "services/rm/elastic_core.h"

namespace atl::rm {

namespace {

// "device 1 on host h1 was" / "devices 2,3 on host h1 were": what a lost host took away.
std::string DevicesOn(const std::vector<uint32_t>& ids, const std::string& host) {
  return fmt::format("{} {} on host {} {}", ids.size() == 1 ? "device" : "devices",
                     fmt::join(ids, ","), host, ids.size() == 1 ? "was" : "were");
}

}  // namespace

void Controller::HostLost(Host& host, const std::string& why, Clock::time_point now,
                          RmActions& out) {
  host.alive = false;
  const std::string reason = fmt::format("{} lost: {}", DevicesOn(host.device_ids, host.name), why);
  spdlog::warn("{}", reason);
  BroadcastHostChanged(host, /*lost=*/true, reason, out);
  TellClients({proto::Heartbeat::kExecutor, host.name, host.control_endpoint, true, reason}, out);
  out.Publish(topics::kHostLost,
              {{"host", host.name}, {"island", host.island}, {"reason", reason}});
  RemapSlicesOff(host, reason, /*drain=*/0, now, out);
}

void Controller::HostBack(Host& host, RmActions& out) {
  host.alive = true;
  spdlog::info("executor {} is back", host.name);
  BroadcastHostChanged(host, /*lost=*/false, "", out);
  TellClients({proto::Heartbeat::kExecutor, host.name, host.control_endpoint, false, ""}, out);
  out.Publish(topics::kHostBack, {{"host", host.name}});
}

void Controller::BroadcastHostChanged(const Host& changed, bool lost, const std::string& reason,
                                      RmActions& out) const {
  const proto::HostChanged message{changed.name, changed.control_endpoint, changed.device_ids, lost,
                                   reason,       changed.data_endpoint};
  for (const auto& [name, h] : state_.hosts) {
    if (!h.alive || name == changed.name) continue;
    out.Send(h.routing_id, 0, message, "executor " + name);
  }
  // When only the executor died, its host's store lives on holding outputs the executor
  // reserved but will never write: told, it fails them so that their readers stop waiting.
  if (lost) out.Tell(ServiceKind::kStore, changed.store_endpoint, message);
  // Only the host's own island places work on it, but every scheduler is told: the notice
  // is small and a scheduler ignores executors it never sends to.
  for (const auto& [island, endpoint] : state_.scheduler_by_island) {
    out.Tell(ServiceKind::kScheduler, endpoint, message);
  }
}

void Controller::RemapSlicesOff(const Host& host, const std::string& reason, uint64_t drain,
                                Clock::time_point now, RmActions& out) {
  for (auto& [id, slice] : state_.slices) {
    auto moved = RemapSliceOff(state_, id, host.name, *placement_);
    if (!moved.ok()) {
      // The slice keeps its lost devices: its runs fail naming them until the host is back.
      const std::string error =
          moved.status().WithContext(fmt::format("remap slice {}", id)).ToString();
      spdlog::warn("{}", error);
      out.Publish(topics::kErrorRm, {{"slice", id}, {"error", error}});
      if (drain != 0) pending_.DrainKept(drain, id);
      continue;
    }
    if (!*moved) continue;
    if (drain != 0) pending_.DrainMoved(drain, id);

    // The slice's functions are compiled on the new mapping (every host: the shard
    // endpoints that collectives meet at changed) before the client may use it.
    const uint64_t rm_request = pending_.NewRequestId();
    size_t acks = 0;
    for (const auto& [function_id, f] : state_.functions) {
      if (f.slice == id) acks += SendCompile(rm_request, function_id, slice, f.def, out);
    }
    if (auto done = pending_.AddRemap(rm_request, id, reason, acks, drain, now)) {
      FinishRemap(*done, atl::Status::Ok(), out);
    }
  }
  out.SaveState();
}

void Controller::FinishRemap(const PendingWork::Remap& remap, const atl::Status& status,
                             RmActions& out) {
  auto slice = state_.slices.find(remap.slice);
  if (slice == state_.slices.end()) {  // its client left meanwhile
    if (remap.drain != 0) DrainStepDone(remap.drain, out);
    return;
  }
  if (!status.ok()) {
    out.Publish(topics::kErrorRm,
                {{"slice", remap.slice},
                 {"error", status
                               .WithContext(fmt::format(
                                   "compile slice {}'s functions on its new devices", remap.slice))
                               .ToString()}});
  }
  TellSliceMoved(slice->second, remap.reason, out);
  spdlog::info("slice {} remapped onto devices {}", remap.slice,
               fmt::join(slice->second.device_ids, ","));
  out.Publish(topics::kSliceRemapped,
              {{"slice", remap.slice},
               {"client", slice->second.client},
               {"island", slice->second.island},
               {"devices", fmt::format("{}", fmt::join(slice->second.device_ids, ","))},
               {"reason", remap.reason}});
  if (remap.drain != 0) DrainStepDone(remap.drain, out);
}

Result<RmActions> Controller::DrainHost(const proto::DrainHost& req, const Caller& from,
                                        Clock::time_point now) {
  auto it = state_.hosts.find(req.host);
  if (it == state_.hosts.end()) return NotFound("host '" + req.host + "' is unknown");
  Host& host = it->second;
  host.drained = true;  // before the remaps: none of its devices may take a slice over
  const std::string reason = DevicesOn(host.device_ids, host.name) + " drained";
  spdlog::info("{}", reason);
  RmActions out;
  const uint64_t drain = pending_.StartDrain(from.routing_id, from.request_id);
  RemapSlicesOff(host, reason, drain, now, out);
  const proto::DrainHostReply& reply = pending_.DrainReply(drain);
  out.Publish(topics::kHostDrained, {{"host", host.name},
                                     {"island", host.island},
                                     {"moved", fmt::format("{}", fmt::join(reply.moved, ","))},
                                     {"kept", fmt::format("{}", fmt::join(reply.kept, ","))}});
  DrainStepDone(drain, out);
  return out;  // answered once every moved slice's client was told
}

void Controller::DrainStepDone(uint64_t drain, RmActions& out) {
  if (auto done = pending_.DrainStepDone(drain)) {
    out.Send(done->routing_id, done->request_id, done->reply, "the member draining a host");
  }
}

}  // namespace atl::rm
