// The RM's view of which services live. Executors, object stores and island schedulers
// heartbeat every `heartbeat_ms`; the RM checks four times per period, so that a service
// silent for `liveness` periods is declared lost at most a quarter period late. A loss is
// published (host.lost, host.store_lost, island.lost), shown by `atoll status`, taken out of
// placement and announced to every client, whose runs that need the lost service then fail
// naming it; a service heard from again is back (host.back, host.store_back, island.back).
// The notices go before the event: whoever watches the events and then uses the client
// (the tests do) finds the client told already. A restarted RM declares nothing lost for
// a while (kReconnectGrace): everyone must reconnect to it first. Nor does an RM that
// stalled, for a liveness lapse after it runs again (StallGuard).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "services/rm/elastic_core.h"
#include "services/rm/rm_service.h"

namespace atl::rm {

Status RmService::OnServiceHeartbeat(const proto::Heartbeat& beat, proto::Incoming& in) {
  const auto now = Clock::now();
  switch (beat.role) {
    case proto::Heartbeat::kExecutor: {
      auto it = state_.hosts.find(beat.id);
      if (it == state_.hosts.end()) return NotFound("host '" + beat.id + "' is unknown");
      it->second.last_heard = now;
      it->second.executor_stall_us = beat.longest_stall_us;
      Reconnected(it->second, in);
      if (!it->second.alive) OnHostBack(it->second);
      return Status::Ok();
    }
    case proto::Heartbeat::kStore: {
      // A store starts before its executor registers the host: until then it is not
      // tracked, and that is no fault.
      auto it = state_.hosts.find(beat.id);
      if (it == state_.hosts.end()) return Status::Ok();
      Host& host = it->second;
      // Restarted within the liveness window: what the old one held is gone all the same.
      const uint64_t old_instance = host.store_instance;
      const bool restarted = old_instance != 0 && beat.instance != old_instance;
      const bool new_instance = beat.instance != old_instance;
      host.store_instance = beat.instance;
      host.store_last_heard = now;
      host.store_stall_us = beat.longest_stall_us;
      if (new_instance) SaveState();
      if (restarted && host.store_alive) {
        OnStoreLost(host, "it restarted, and the objects it held are gone", old_instance);
      }
      if (!host.store_alive) OnStoreBack(host);
      return Status::Ok();
    }
    case proto::Heartbeat::kScheduler: {
      auto it = state_.schedulers.find(beat.id);
      if (it == state_.schedulers.end()) {
        return NotFound("the scheduler of island '" + beat.id + "' is not registered");
      }
      it->second.last_heard = now;
      it->second.stall_us = beat.longest_stall_us;
      if (!it->second.alive) OnSchedulerBack(beat.id);
      return Status::Ok();
    }
    default:
      return InvalidArgument(fmt::format("heartbeat of unknown role {}", beat.role));
  }
}

void RmService::CheckHeartbeats(Clock::time_point now) {
  const auto lapse = std::chrono::milliseconds(config_.heartbeat_ms) * config_.liveness;
  const std::string missed = fmt::format("missed {} heartbeats", config_.liveness);
  for (const std::string& name : SilentHosts(state_, now, lapse)) {
    Host& host = state_.hosts.at(name);
    OnHostLost(host, host.drained ? "it was drained and has left" : "its executor " + missed);
  }
  for (const std::string& name : SilentStores(state_, now, lapse)) {
    Host& host = state_.hosts.at(name);
    OnStoreLost(host, "it " + missed, host.store_instance);
  }
  for (const std::string& island : SilentSchedulers(state_, now, lapse)) {
    OnSchedulerLost(island, "it " + missed);
  }
  for (uint64_t id : SilentClients(state_, now, lapse)) {
    DropClient(id,
               fmt::format("heartbeat lapsed: the RM heard none from it for {} ms", lapse.count()));
  }
}

void RmService::CheckLiveness() {
  const auto now = Clock::now();
  if (stall_guard_.MayJudge(now)) CheckHeartbeats(now);
  std::vector<uint64_t> expired;
  for (const auto& [id, p] : pending_) {
    if (now > p.deadline) expired.push_back(id);
  }
  const Status late = DeadlineExceeded(
      fmt::format("executors did not compile within {} s",
                  std::chrono::duration_cast<std::chrono::seconds>(kCompileTimeout).count()));
  for (uint64_t id : expired) FinishRegistration(id, late);
  expired.clear();
  for (const auto& [id, r] : remaps_) {
    if (now > r.deadline) expired.push_back(id);
  }
  for (uint64_t id : expired) FinishRemap(id, late);
  FlushState();
}

bool RmService::SchedulerAlive(const std::string& island) const {
  auto it = state_.schedulers.find(island);
  return it != state_.schedulers.end() && it->second.alive;
}

void RmService::OnSchedulerLost(const std::string& island, const std::string& why) {
  state_.schedulers.at(island).alive = false;
  const std::string& endpoint = state_.scheduler_by_island.at(island);
  const std::string reason =
      fmt::format("the scheduler of island {} ({}) was lost: {}", island, endpoint, why);
  spdlog::warn("{}", reason);
  TellClients({proto::Heartbeat::kScheduler, island, endpoint, true, reason});
  events_->Publish("island.lost", {{"island", island}, {"endpoint", endpoint}, {"reason", reason}});
}

void RmService::OnSchedulerBack(const std::string& island) {
  state_.schedulers.at(island).alive = true;
  const std::string& endpoint = state_.scheduler_by_island.at(island);
  spdlog::info("the scheduler of island {} is back", island);
  TellClients({proto::Heartbeat::kScheduler, island, endpoint, false, ""});
  events_->Publish("island.back", {{"island", island}, {"endpoint", endpoint}});
}

void RmService::OnStoreLost(Host& host, const std::string& why, uint64_t instance) {
  host.store_alive = false;
  const std::string reason = fmt::format("the object store of host {} ({}) was lost: {}", host.name,
                                         host.store_endpoint, why);
  spdlog::warn("{}", reason);
  const proto::ServiceChanged notice{
      proto::Heartbeat::kStore, host.name, host.store_endpoint, true, reason, instance};
  TellExecutor(host, notice);
  TellClients(notice);
  events_->Publish("host.store_lost", {{"host", host.name},
                                       {"island", host.island},
                                       {"endpoint", host.store_endpoint},
                                       {"reason", reason}});
}

void RmService::OnStoreBack(Host& host) {
  host.store_alive = true;
  spdlog::info("the object store of host {} is back", host.name);
  const proto::ServiceChanged notice{
      proto::Heartbeat::kStore, host.name, host.store_endpoint, false, "", host.store_instance};
  TellExecutor(host, notice);
  TellClients(notice);
  events_->Publish("host.store_back", {{"host", host.name}, {"endpoint", host.store_endpoint}});
}

void RmService::TellClients(const proto::ServiceChanged& notice) {
  for (const auto& [id, client] : state_.clients) {
    if (client.routing_id.empty()) continue;
    zmq::message_t routing(client.routing_id.data(), client.routing_id.size());
    Status sent = net::Send(socket_, &routing, 0, notice);
    if (!sent.ok()) spdlog::debug("ServiceChanged to client {}: {}", id, sent.ToString());
  }
}

void RmService::TellExecutor(const Host& host, const proto::ServiceChanged& notice) {
  // Told even while its executor counts as lost: a host cut off from the network keeps its
  // connection, gets what was sent meanwhile once it is back (its store's loss, say), and
  // must then hear that the store is back too. A dead executor's connection is gone, and
  // the notice with it.
  if (host.routing_id.empty()) return;
  zmq::message_t routing(host.routing_id.data(), host.routing_id.size());
  Status sent = net::Send(socket_, &routing, 0, notice);
  if (!sent.ok()) {
    spdlog::log(host.alive ? spdlog::level::warn : spdlog::level::debug,
                "ServiceChanged to executor {}: {}", host.name, sent.ToString());
  }
}

}  // namespace atl::rm
