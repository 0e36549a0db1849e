#include "services/scheduler/submission_check.h"

#include <set>
#include <vector>

#include <fmt/format.h>

#include "common/proto/ids.h"

namespace atl::scheduler {

namespace {

Status CheckRun(uint64_t run_id, uint64_t client) {
  if (proto::ClientOfRun(run_id) == client) return Status::Ok();
  return PermissionDenied(fmt::format("run {} is client {}'s, not client {}'s", run_id,
                                      proto::ClientOfRun(run_id), client));
}

Status CheckObject(uint64_t object_id, uint64_t client, const char* use) {
  if (proto::ClientOfObject(object_id) == client) return Status::Ok();
  return PermissionDenied(fmt::format("a run of client {} may not {} object {}: it is client {}'s",
                                      client, use, object_id, proto::ClientOfObject(object_id)));
}

Status CheckEntry(const proto::Entry& entry, const proto::SubmitProgram& program) {
  const uint64_t client = program.client_id;
  if (entry.run_id != program.run_id || entry.owner_client != client) {
    return PermissionDenied(fmt::format("an entry of run {} (client {}) names run {} of client {}",
                                        program.run_id, client, entry.run_id, entry.owner_client));
  }
  for (const auto& input : entry.inputs) {
    if (input.kind == proto::InputSource::kStore) {
      ATOLL_RETURN_IF_ERROR(CheckObject(input.object_id, client, "read"));
    }
  }
  for (const auto& dests : entry.outputs) {
    for (const auto& dest : dests) {
      if (dest.kind == proto::OutputDest::kStore) {
        ATOLL_RETURN_IF_ERROR(CheckObject(dest.object_id, client, "write"));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckSubmission(const proto::Peer& sender, const proto::SubmitProgram& program,
                       OwnerCache& owners) {
  // Even a member submits only for a connected client: ids are handed out in order, and a
  // run queued for one not given out yet would sit in the queue its real client later gets.
  if (sender.member()) return owners.ClientUser(program.client_id).status();
  const uint64_t client = program.client_id;
  ATOLL_RETURN_IF_ERROR(owners.CheckClient(sender, client, "submit a run"));
  ATOLL_RETURN_IF_ERROR(CheckRun(program.run_id, client));
  std::set<uint64_t> functions;
  for (const auto& placed : program.entries) {
    ATOLL_RETURN_IF_ERROR(CheckEntry(placed.entry, program));
    functions.insert(placed.entry.function_id);
  }
  ATOLL_ASSIGN_OR_RETURN(auto function_clients,
                         owners.FunctionClients({functions.begin(), functions.end()}));
  for (const auto& [function, owner] : function_clients) {
    if (owner == 0) return NotFound(fmt::format("function {} is not registered", function));
    if (owner != client) {
      return PermissionDenied(fmt::format(
          "client {} may not call function {}: it was registered by client {}, on its own slice",
          client, function, owner));
    }
  }
  return Status::Ok();
}

Status CheckCancel(const proto::Peer& sender, const proto::CancelRun& cancel, OwnerCache& owners) {
  if (sender.member()) return Status::Ok();
  ATOLL_RETURN_IF_ERROR(owners.CheckClient(sender, cancel.client_id, "cancel a run"));
  return CheckRun(cancel.run_id, cancel.client_id);
}

}  // namespace atl::scheduler
