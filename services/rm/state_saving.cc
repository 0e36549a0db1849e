// The RM's state file (state_file.h): what persists of `state_` is written once per turn of
// the loop that changed it, and the answers that must not go out before it is (a client's
// id, its slice) wait for that write. A burst of 256 clients saying hello rewrote the whole
// file up to 256 times in one turn: about 40% of the RM loop's CPU in that burst (perf).
#include <filesystem>

#include <spdlog/spdlog.h>

#include "services/rm/rm_service.h"
#include "services/rm/state_file.h"

namespace atl::rm {

void RmService::SaveState() { state_dirty_ = true; }

void RmService::SaveStateNow() {
  state_dirty_ = true;
  FlushState();
}

void RmService::FlushState() {
  if (state_dirty_ && !state_file_.empty()) {
    ReportSaveError(WriteStateFile(state_file_, state_));
  }
  state_dirty_ = false;
  for (HeldReply& reply : held_replies_) {
    const Status sent = net::SendCounted(socket_, reply.frames, reply.kind, reply.first_counted);
    if (!sent.ok()) spdlog::debug("a reply held for the state file: {}", sent.ToString());
  }
  held_replies_.clear();
}

void RmService::SaveFunction(uint64_t id, const RmState::Function& function) {
  if (state_file_.empty()) return;
  ReportSaveError(AppendFunction(state_file_, id, function));
}

void RmService::ReportSaveError(const Status& saved) {
  if (saved.ok()) return;
  spdlog::error("{}", saved.message());
  events_->Publish("error.rm", {{"error", saved.message()}});
}

Status RmService::LoadState() {
  if (state_file_.empty() || !std::filesystem::exists(state_file_)) return Status::Ok();
  ATOLL_ASSIGN_OR_RETURN(state_, ReadStateFile(state_file_));
  const auto now = Clock::now();
  for (auto& [name, host] : state_.hosts) host.last_heard = host.store_last_heard = now;
  for (const auto& [island, endpoint] : state_.scheduler_by_island) {
    state_.schedulers[island].last_heard = now;
  }
  for (auto& [id, client] : state_.clients) client.last_heard = now;
  stall_guard_.QuietUntil(now + kReconnectGrace);
  spdlog::info("state from {}: {} hosts, {} clients, {} slices, {} functions", state_file_,
               state_.hosts.size(), state_.clients.size(), state_.slices.size(),
               state_.functions.size());
  return Status::Ok();
}

}  // namespace atl::rm
