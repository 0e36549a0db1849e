// Who owns what: the RM answers a store's or scheduler's LookupOwners, and tells them
// (OwnersKnown) as clients connect and register functions, so that none of them blocks its
// event loop on a round trip to the RM for each new client (OwnerCache, owner_cache.h).
#include <spdlog/spdlog.h>

#include "services/rm/rm_service.h"

namespace atl::rm {

namespace {

// Sends `notice` to the service at `endpoint` through `pool`; a failure is logged only: the
// service asks for what it was not told (LookupOwners).
void Tell(net::DealerPool& pool, const std::string& endpoint, const proto::OwnersKnown& notice) {
  auto socket = pool.Get(endpoint);
  const Status sent = socket.ok() ? net::Send(**socket, nullptr, 0, notice) : socket.status();
  if (!sent.ok()) spdlog::debug("OwnersKnown to {}: {}", endpoint, sent.ToString());
}

}  // namespace

Status RmService::OnLookupOwners(proto::Incoming& in) {
  ATOLL_ASSIGN_OR_RETURN(auto req, in.header.As<proto::LookupOwners>());
  proto::Owners owners;
  for (uint64_t id : req.clients) {
    auto it = state_.clients.find(id);
    owners.client_users.push_back(it != state_.clients.end() ? it->second.user_id : "");
    owners.clients_alive.push_back(it != state_.clients.end());
    auto gone = gone_reasons_.find(id);
    owners.clients_gone_why.push_back(gone != gone_reasons_.end() ? gone->second : "");
  }
  for (uint64_t id : req.functions) {
    auto it = state_.functions.find(id);
    owners.function_clients.push_back(it != state_.functions.end() ? it->second.client : 0);
  }
  owners.next_client_id = state_.next_client_id;
  return net::Reply(socket_, in, owners);
}

void RmService::TellClientOwner(uint64_t client_id) {
  // Told before the client hears its id, which it needs to name itself to them: a store or
  // scheduler hears the notice first unless its queue holds it back (it then asks).
  TellOwners({{client_id}, {state_.clients.at(client_id).user_id}, {}, {}, {}, {}});
}

void RmService::TellClientGone(uint64_t client_id, const std::string& why) {
  TellOwners({{}, {}, {}, {}, {client_id}, {why}});
}

void RmService::TellOwners(const proto::OwnersKnown& notice) {
  for (const auto& [name, host] : state_.hosts) {
    if (host.store_alive && !host.store_endpoint.empty())
      Tell(stores_, host.store_endpoint, notice);
  }
  for (const auto& [island, endpoint] : state_.scheduler_by_island) {
    if (SchedulerAlive(island)) Tell(schedulers_, endpoint, notice);
  }
}

void RmService::TellFunctionOwner(uint64_t function_id, const std::string& island) {
  auto scheduler = state_.scheduler_by_island.find(island);
  if (scheduler == state_.scheduler_by_island.end() || !SchedulerAlive(island)) return;
  Tell(schedulers_, scheduler->second,
       {{}, {}, {function_id}, {state_.functions.at(function_id).client}, {}, {}});
}

}  // namespace atl::rm
