// The controller's registry of functions: a registered function is compiled on every
// executor of its slice before its client hears its id, compiled again on an executor that
// restarted, and its owner told to its island's scheduler. Who owns what (clients' keys,
// functions' clients) is answered to stores and schedulers that ask (LookupOwners) and told
// to them as it happens (OwnersKnown), so that none of them blocks its event loop on a round
// trip to the RM for each new client (OwnerCache, owner_cache.h).
#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/net/event_topics.h"
#include "services/rm/controller.h"

namespace atl::rm {

Result<RmActions> Controller::RegisterFunction(const proto::RegisterFunction& req,
                                               const Caller& from, Clock::time_point now) {
  ATOLL_RETURN_IF_ERROR(RequireKnownClient(req.client_id, "register a function"));
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
  atl::Status valid = ir::Validate(req.function, shards);
  if (!valid.ok()) return valid.WithContext("function '" + req.function.name + "'");

  state_.clients.at(req.client_id).routing_id = from.routing_id;
  const uint64_t function_id = state_.next_function_id++;
  state_.functions[function_id] = RmState::Function{req.client_id, slice.id, req.function};
  RmActions out;
  TellFunctionOwner(function_id, slice.island, out);
  // Background compilation: every executor hosting a device of the slice gets the
  // function now, so the first call finds it ready. The client hears back once all did.
  const uint64_t rm_request = pending_.NewRequestId();
  const size_t hosts = SendCompile(rm_request, function_id, slice, req.function, out);
  pending_.AddRegistration(rm_request, from.routing_id, from.request_id, function_id, hosts, now);
  return out;
}

size_t Controller::SendCompile(uint64_t rm_request, uint64_t function_id, const Slice& slice,
                               const ir::FunctionDef& def, RmActions& out,
                               const std::string& only_host) {
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
    out.Send(h.routing_id, rm_request, compile, "executor " + name);
  }
  return hosts.size();
}

void Controller::Reconnected(Host& host, const std::string& routing_id, RmActions& out) {
  // The executor's connection may be new (the RM restarted): Compile goes where it is.
  host.routing_id = routing_id;
  for (auto& [rm_request, compile] : std::exchange(host.held, {})) {
    out.Send(host.routing_id, rm_request, std::move(compile), "executor " + host.name);
  }
}

std::vector<uint64_t> Controller::FunctionsOn(const Host& host) const {
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

void Controller::CompileAgainOn(const Host& host, const std::vector<uint64_t>& functions,
                                RmActions& out) {
  const uint64_t rm_request = pending_.NewRequestId();  // no registration waits on it
  for (uint64_t function_id : functions) {
    const RmState::Function& f = state_.functions.at(function_id);
    SendCompile(rm_request, function_id, state_.slices.at(f.slice), f.def, out, host.name);
  }
}

RmActions Controller::CompileAnswered(uint64_t rm_request, const atl::Status& error) {
  RmActions out;
  if (auto done = pending_.RegistrationAnswered(rm_request, !error.ok())) {
    FinishRegistration(*done, error, out);
  } else if (auto remap = pending_.RemapAnswered(rm_request, !error.ok())) {
    FinishRemap(*remap, error, out);
  }
  return out;  // nothing when late: the registration or remap already finished
}

RmActions Controller::CompileUnsent(uint64_t rm_request, const atl::Status& error) {
  return CompileAnswered(rm_request, error.ok() ? Unavailable("compile not sent") : error);
}

void Controller::FinishRegistration(const PendingWork::Registration& done,
                                    const atl::Status& status, RmActions& out) {
  if (!status.ok()) {
    state_.functions.erase(done.function_id);
    out.Publish(topics::kErrorRm, {{"error", status.ToString()}});
    out.Send(done.client_routing_id, done.client_request_id,
             proto::ToError(status.WithContext("compile")), "a registering client");
    return;
  }
  auto f = state_.functions.find(done.function_id);
  if (f == state_.functions.end()) return;  // its client left while it compiled
  out.AppendFunction(done.function_id);
  out.Publish(
      topics::kFunctionRegistered,
      {{"function", done.function_id}, {"name", f->second.def.name}, {"slice", f->second.slice}});
  out.Send(done.client_routing_id, done.client_request_id,
           proto::RegisterFunctionReply{done.function_id}, "a registering client");
}

proto::Owners Controller::LookupOwners(const proto::LookupOwners& req) const {
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
  return owners;
}

void Controller::TellOwners(const proto::OwnersKnown& notice, RmActions& out) const {
  for (const auto& [name, host] : state_.hosts) {
    if (host.store_alive && !host.store_endpoint.empty()) {
      out.Tell(ServiceKind::kStore, host.store_endpoint, notice);
    }
  }
  for (const auto& [island, endpoint] : state_.scheduler_by_island) {
    if (SchedulerAlive(island)) out.Tell(ServiceKind::kScheduler, endpoint, notice);
  }
}

void Controller::TellFunctionOwner(uint64_t function_id, const std::string& island,
                                   RmActions& out) const {
  auto scheduler = state_.scheduler_by_island.find(island);
  if (scheduler == state_.scheduler_by_island.end() || !SchedulerAlive(island)) return;
  out.Tell(
      ServiceKind::kScheduler, scheduler->second,
      proto::OwnersKnown{
          {}, {}, {function_id}, {state_.functions.at(function_id).client}, {}, {}, false, {}});
}

}  // namespace atl::rm
