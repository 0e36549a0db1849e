// The RM's state file (state_file.h): what persists of the controller's state is written
// once per turn of the loop that changed it, and the answers that must not go out before it
// is (a client's id, its slice) wait for that write. A burst of 256 clients saying hello
// rewrote the whole file up to 256 times in one turn: about 40% of the RM loop's CPU in that
// burst (perf).
#include <filesystem>
#include <variant>

#include <spdlog/spdlog.h>

#include "common/net/event_topics.h"
#include "services/rm/rm_service.h"
#include "services/rm/state_file.h"

namespace atl::rm {

Status RmService::Answer(const proto::Incoming& in, const RmMessage& body) {
  return std::visit(
      [&](const auto& message) -> Status {
        using Body = std::decay_t<decltype(message)>;
        if (!state_dirty_) return net::Reply(socket_, in, message);
        HeldReply held{{}, Body::kKind, in.routing_id ? size_t{1} : size_t{0}};
        if (in.routing_id) held.frames.emplace_back(in.routing_id->data(), in.routing_id->size());
        held.frames.push_back(proto::EncodeHeader(in.header.request_id(), message));
        held_replies_.push_back(std::move(held));
        return Status::Ok();
      },
      body);
}

void RmService::FlushState() {
  if (state_dirty_ && !state_file_.empty()) {
    ReportSaveError(WriteStateFile(state_file_, controller_.state()));
  }
  state_dirty_ = false;
  for (HeldReply& reply : held_replies_) {
    const Status sent = net::SendCounted(socket_, reply.frames, reply.kind, reply.first_counted);
    if (!sent.ok()) spdlog::debug("a reply held for the state file: {}", sent.ToString());
  }
  held_replies_.clear();
}

void RmService::SaveFunction(uint64_t id) {
  if (state_file_.empty()) return;
  ReportSaveError(AppendFunction(state_file_, id, controller_.state().functions.at(id)));
}

void RmService::ReportSaveError(const Status& saved) {
  if (saved.ok()) return;
  spdlog::error("{}", saved.message());
  events_->Publish(topics::kErrorRm, {{"error", saved.message()}});
}

Status RmService::LoadState() {
  if (state_file_.empty() || !std::filesystem::exists(state_file_)) return Status::Ok();
  ATOLL_ASSIGN_OR_RETURN(RmState state, ReadStateFile(state_file_));
  controller_.Restore(std::move(state), Clock::now());
  const RmState& loaded = controller_.state();
  spdlog::info("state from {}: {} hosts, {} clients, {} slices, {} functions", state_file_,
               loaded.hosts.size(), loaded.clients.size(), loaded.slices.size(),
               loaded.functions.size());
  return Status::Ok();
}

}  // namespace atl::rm
