// The controller's view of which services live. Executors, object stores and island
// schedulers heartbeat every `heartbeat_ms`; the RM checks four times per period, so that a
// service silent for `liveness` periods is declared lost at most a quarter period late. A
// loss is published (host.lost, host.store_lost, island.lost), shown by `atoll status`,
// taken out of placement and announced to every client, whose runs that need the lost
// service then fail naming it; a service heard from again is back (host.back,
// host.store_back, island.back). The notices go before the event: whoever watches the
// events and then uses the client (the tests do) finds the client told already. A
// restarted RM declares nothing lost for a while (kReconnectGrace): everyone must reconnect
// to it first. Nor does an RM that stalled, for a liveness lapse after it runs again
// (StallGuard). A client silent as long is dropped, its slices freed.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/net/event_topics.h"
#include "services/rm/controller.h"
#include "services/rm/elastic_core.h"

namespace atl::rm {

Result<RmActions> Controller::Heartbeat(const proto::Heartbeat& beat, const Caller& from,
                                        Clock::time_point now) {
  RmActions out;
  switch (beat.role) {
    case proto::Heartbeat::kClient: {
      ATOLL_ASSIGN_OR_RETURN(const uint64_t id, proto::HeartbeatClientId(beat));
      if (state_.clients.count(id) == 0) {
        // Routine, not a fault: a heartbeat in flight (on its own connection) when the
        // client's Goodbye came, or one from a client dropped already, which learns it at
        // its next call.
        spdlog::debug("heartbeat of client {}, which is gone", id);
        return out;
      }
      clients_heard_.Heard(id, now);
      return out;
    }
    case proto::Heartbeat::kExecutor: {
      auto it = state_.hosts.find(beat.id);
      if (it == state_.hosts.end()) return NotFound("host '" + beat.id + "' is unknown");
      ExecutorHeartbeat(beat, it->second, from, now, out);
      return out;
    }
    case proto::Heartbeat::kStore: {
      // A store starts before its executor registers the host: until then it is not
      // tracked, and that is no fault.
      auto it = state_.hosts.find(beat.id);
      if (it != state_.hosts.end()) StoreHeartbeat(beat, it->second, now, out);
      return out;
    }
    case proto::Heartbeat::kScheduler: {
      auto it = state_.schedulers.find(beat.id);
      if (it == state_.schedulers.end()) {
        return NotFound("the scheduler of island '" + beat.id + "' is not registered");
      }
      it->second.last_heard = now;
      it->second.stall_us = beat.longest_stall_us;
      if (!it->second.alive) SchedulerBack(beat.id, out);
      return out;
    }
    default:
      return InvalidArgument(fmt::format("heartbeat of unknown role {}", beat.role));
  }
}

void Controller::ExecutorHeartbeat(const proto::Heartbeat& beat, Host& host, const Caller& from,
                                   Clock::time_point now, RmActions& out) {
  host.last_heard = now;
  host.executor_stall_us = beat.longest_stall_us;
  Reconnected(host, from.routing_id, out);
  if (!host.alive) HostBack(host, out);
}

void Controller::StoreHeartbeat(const proto::Heartbeat& beat, Host& host, Clock::time_point now,
                                RmActions& out) {
  // Restarted within the liveness window: what the old one held is gone all the same.
  const uint64_t old_instance = host.store_instance;
  const bool restarted = old_instance != 0 && beat.instance != old_instance;
  const bool new_instance = beat.instance != old_instance;
  host.store_instance = beat.instance;
  host.store_last_heard = now;
  host.store_stall_us = beat.longest_stall_us;
  if (new_instance) out.SaveState();
  if (restarted && host.store_alive) {
    StoreLost(host, "it restarted, and the objects it held are gone", old_instance, out);
  }
  if (!host.store_alive) StoreBack(host, out);
}

RmActions Controller::CheckLiveness(Clock::time_point now) {
  RmActions out;
  if (stall_guard_.MayJudge(now)) CheckHeartbeats(now, out);
  FailLateCompiles(now, out);
  TellClientTable(now, out);
  return out;
}

void Controller::TellClientTable(Clock::time_point now, RmActions& out) {
  if (now - table_told_ < std::chrono::milliseconds(options_.heartbeat_ms)) return;
  table_told_ = now;
  proto::OwnersKnown table;
  table.table = true;
  for (const auto& [id, client] : state_.clients) table.alive_clients.push_back(id);
  TellOwners(table, out);
}

void Controller::CheckHeartbeats(Clock::time_point now, RmActions& out) {
  const auto lapse = clients_heard_.lapse();
  const std::string missed = fmt::format("missed {} heartbeats", options_.liveness);
  for (const std::string& name : SilentHosts(state_, now, lapse)) {
    Host& host = state_.hosts.at(name);
    HostLost(host, host.drained ? "it was drained and has left" : "its executor " + missed, now,
             out);
  }
  for (const std::string& name : SilentStores(state_, now, lapse)) {
    Host& host = state_.hosts.at(name);
    StoreLost(host, "it " + missed, host.store_instance, out);
  }
  for (const std::string& island : SilentSchedulers(state_, now, lapse)) {
    SchedulerLost(island, "it " + missed, out);
  }
  const auto lapse_ms = std::chrono::duration_cast<std::chrono::milliseconds>(lapse).count();
  for (uint64_t id : clients_heard_.TakeSilent(now)) {
    DropClient(id, fmt::format("heartbeat lapsed: the RM heard none from it for {} ms", lapse_ms),
               out);
  }
}

void Controller::FailLateCompiles(Clock::time_point now, RmActions& out) {
  const atl::Status late = DeadlineExceeded(fmt::format(
      "executors did not compile within {} s",
      std::chrono::duration_cast<std::chrono::seconds>(options_.compile_timeout).count()));
  for (const auto& registration : pending_.ExpiredRegistrations(now)) {
    FinishRegistration(registration, late, out);
  }
  for (const auto& remap : pending_.ExpiredRemaps(now)) FinishRemap(remap, late, out);
}

void Controller::SchedulerLost(const std::string& island, const std::string& why, RmActions& out) {
  state_.schedulers.at(island).alive = false;
  const std::string& endpoint = state_.scheduler_by_island.at(island);
  const std::string reason =
      fmt::format("the scheduler of island {} ({}) was lost: {}", island, endpoint, why);
  spdlog::warn("{}", reason);
  TellClients({proto::Heartbeat::kScheduler, island, endpoint, true, reason}, out);
  out.Publish(topics::kIslandLost,
              {{"island", island}, {"endpoint", endpoint}, {"reason", reason}});
}

void Controller::SchedulerBack(const std::string& island, RmActions& out) {
  state_.schedulers.at(island).alive = true;
  const std::string& endpoint = state_.scheduler_by_island.at(island);
  spdlog::info("the scheduler of island {} is back", island);
  TellClients({proto::Heartbeat::kScheduler, island, endpoint, false, ""}, out);
  out.Publish(topics::kIslandBack, {{"island", island}, {"endpoint", endpoint}});
}

void Controller::StoreLost(Host& host, const std::string& why, uint64_t instance, RmActions& out) {
  host.store_alive = false;
  const std::string reason = fmt::format("the object store of host {} ({}) was lost: {}", host.name,
                                         host.store_endpoint, why);
  spdlog::warn("{}", reason);
  const proto::ServiceChanged notice{
      proto::Heartbeat::kStore, host.name, host.store_endpoint, true, reason, instance};
  TellExecutor(host, notice, out);
  TellClients(notice, out);
  out.Publish(topics::kHostStoreLost, {{"host", host.name},
                                       {"island", host.island},
                                       {"endpoint", host.store_endpoint},
                                       {"reason", reason}});
}

void Controller::StoreBack(Host& host, RmActions& out) {
  host.store_alive = true;
  spdlog::info("the object store of host {} is back", host.name);
  const proto::ServiceChanged notice{
      proto::Heartbeat::kStore, host.name, host.store_endpoint, false, "", host.store_instance};
  TellExecutor(host, notice, out);
  TellClients(notice, out);
  out.Publish(topics::kHostStoreBack, {{"host", host.name}, {"endpoint", host.store_endpoint}});
}

void Controller::TellClients(const proto::ServiceChanged& notice, RmActions& out) const {
  for (const auto& [id, client] : state_.clients) {
    if (client.routing_id.empty()) continue;
    out.Send(client.routing_id, 0, notice, fmt::format("client {}", id));
  }
}

void Controller::TellExecutor(const Host& host, const proto::ServiceChanged& notice,
                              RmActions& out) const {
  // Told even while its executor counts as lost: a host cut off from the network keeps its
  // connection, gets what was sent meanwhile once it is back (its store's loss, say), and
  // must then hear that the store is back too. A dead executor's connection is gone, and
  // the notice with it.
  if (host.routing_id.empty()) return;
  out.Send(host.routing_id, 0, notice, "executor " + host.name);
}

}  // namespace atl::rm
