#include "common/service/owner_cache.h"

#include <fmt/format.h>

#include <algorithm>

namespace atl {

std::chrono::milliseconds OwnerCache::LookupTimeout(std::chrono::milliseconds heartbeat,
                                                    uint32_t liveness) {
  return std::min(std::chrono::milliseconds(2000), heartbeat * liveness / 2);
}

Result<proto::Owners> OwnerCache::Ask(proto::LookupOwners request) {
  auto owners = rm_->Call<proto::Owners>(request, timeout_);
  if (!owners.ok()) return owners.status().WithContext("asking the RM who owns what");
  if (owners->client_users.size() != request.clients.size() ||
      owners->clients_alive.size() != request.clients.size() ||
      owners->clients_gone_why.size() != request.clients.size() ||
      owners->function_clients.size() != request.functions.size()) {
    return Internal("the RM answered LookupOwners with lists of the wrong lengths");
  }
  return owners;
}

Result<std::string> OwnerCache::ClientUser(uint64_t client) {
  if (rm_ == nullptr) return std::string();
  if (auto it = client_users_.find(client); it != client_users_.end()) return it->second;
  auto gone = gone_clients_.find(client);
  if (gone == gone_clients_.end()) {
    // The next ids too: clients that connect together are asked about together (a notice,
    // OwnersKnown, can come after their first requests: a ROUTER takes turns between its
    // peers' connections, and the RM's is one of hundreds in a burst).
    proto::LookupOwners ask;
    for (uint64_t id = client; id < client + kLookupAhead && id >= client; ++id) {
      ask.clients.push_back(id);
    }
    ATOLL_ASSIGN_OR_RETURN(proto::Owners owners, Ask(std::move(ask)));
    for (size_t i = 1; i < owners.clients_alive.size(); ++i) {
      if (owners.clients_alive[i] && gone_clients_.count(client + i) == 0) {
        if (client_users_.size() >= kMaxKnown) client_users_.clear();
        client_users_[client + i] = owners.client_users[i];
      }
    }
    if (owners.clients_alive[0]) return client_users_[client] = owners.client_users[0];
    // An id the RM has not given out yet may be the next client's: not remembered.
    if (client >= owners.next_client_id) {
      return NotFound(fmt::format("client {} is not connected to the cluster", client));
    }
    if (gone_clients_.size() >= kMaxGoneClients) gone_clients_.clear();
    gone = gone_clients_.emplace(client, std::move(owners.clients_gone_why[0])).first;
  }
  if (gone->second.empty()) return Cancelled(fmt::format("client {} has left the cluster", client));
  return Cancelled(fmt::format("client {} has left the cluster ({})", client, gone->second));
}

Status OwnerCache::Learn(const proto::OwnersKnown& known) {
  if (known.clients.size() != known.client_users.size() ||
      known.functions.size() != known.function_clients.size() ||
      known.gone_clients.size() != known.gone_why.size()) {
    return InvalidArgument("OwnersKnown with lists of unequal lengths");
  }
  if (client_users_.size() + known.clients.size() > kMaxKnown) client_users_.clear();
  if (function_clients_.size() + known.functions.size() > kMaxKnown) function_clients_.clear();
  for (size_t i = 0; i < known.clients.size(); ++i) {
    // A client this service saw leave stays gone: ids are never reused.
    if (gone_clients_.count(known.clients[i]) == 0) {
      client_users_[known.clients[i]] = known.client_users[i];
    }
  }
  for (size_t i = 0; i < known.functions.size(); ++i) {
    if (known.function_clients[i] != 0) {
      function_clients_[known.functions[i]] = known.function_clients[i];
    }
  }
  for (size_t i = 0; i < known.gone_clients.size(); ++i) {
    // Only a client known here: one told gone before the RM gave its id out (a garbled
    // notice, which the wire fuzz test sends) would turn away the client that gets it. An
    // unknown one is asked about when it is named.
    if (client_users_.count(known.gone_clients[i]) == 0) continue;
    ForgetClient(known.gone_clients[i]);
    if (gone_clients_.size() >= kMaxGoneClients) gone_clients_.clear();
    gone_clients_[known.gone_clients[i]] = known.gone_why[i];
  }
  return Status::Ok();
}

Status OwnerCache::LearnFrom(const proto::Incoming& in) {
  ATOLL_RETURN_IF_ERROR(proto::RequireMember(in.sender, "tell who owns what"));
  ATOLL_ASSIGN_OR_RETURN(auto known, in.header.As<proto::OwnersKnown>());
  return Learn(known);
}

Status OwnerCache::CheckClient(const proto::Peer& sender, uint64_t client,
                               std::string_view action) {
  if (sender.member()) return Status::Ok();
  ATOLL_ASSIGN_OR_RETURN(std::string user, ClientUser(client));
  return proto::RequireClient(sender, client, user, action);
}

Status OwnerCache::CheckGoodbye(const proto::Peer& sender, uint64_t client) {
  // Only clients say goodbye, so a member's is looked up too (plain text makes every peer
  // a member): one naming an id the RM has not given out would otherwise turn away the
  // client that gets it next.
  Result<std::string> user = ClientUser(client);
  // Gone already: nothing of it is left to protect, whoever says so.
  if (user.status().code() == Code::kCancelled) return Status::Ok();
  ATOLL_RETURN_IF_ERROR(user.status().WithContext("say goodbye"));
  return proto::RequireClient(sender, client, *user, "say goodbye");
}

Result<std::map<uint64_t, uint64_t>> OwnerCache::FunctionClients(
    const std::vector<uint64_t>& functions) {
  proto::LookupOwners unknown;
  for (uint64_t f : functions) {
    if (function_clients_.count(f) == 0) unknown.functions.push_back(f);
  }
  if (!unknown.functions.empty() && rm_ != nullptr) {
    ATOLL_ASSIGN_OR_RETURN(proto::Owners owners, Ask(unknown));
    for (size_t i = 0; i < unknown.functions.size(); ++i) {
      // Only known functions are kept: an unknown id may be registered later.
      if (owners.function_clients[i] != 0) {
        function_clients_[unknown.functions[i]] = owners.function_clients[i];
      }
    }
  }
  std::map<uint64_t, uint64_t> out;
  for (uint64_t f : functions) {
    auto it = function_clients_.find(f);
    out[f] = it != function_clients_.end() ? it->second : 0;
  }
  return out;
}

void OwnerCache::ForgetClient(uint64_t client) {
  client_users_.erase(client);
  std::erase_if(function_clients_, [&](const auto& kv) { return kv.second == client; });
}

}  // namespace atl
