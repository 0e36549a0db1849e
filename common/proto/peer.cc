#include "common/proto/peer.h"

namespace atl::proto {

std::string Peer::client_key() const {
  const std::string prefix = kClientUserIdPrefix;
  return user_id.rfind(prefix, 0) == 0 ? user_id.substr(prefix.size()) : "";
}

std::string Peer::Describe() const {
  if (plain_text()) return "an unauthenticated peer";
  if (user_id == kMemberUserId) return "a cluster member";
  return "client key " + client_key();
}

Status RequireMember(const Peer& sender, std::string_view action) {
  if (sender.member()) return Status::Ok();
  return PermissionDenied(std::string("only the cluster's services may ") + std::string(action) +
                          "; the sender is " + sender.Describe());
}

Status RequireClient(const Peer& sender, uint64_t client, const std::string& client_user_id,
                     std::string_view action) {
  if (sender.member() || (!client_user_id.empty() && client_user_id == sender.user_id)) {
    return Status::Ok();
  }
  return PermissionDenied(std::string(action) + ": client " + std::to_string(client) +
                          " is not the sender's (" + sender.Describe() +
                          "); a client may touch only its own slices, functions, runs and "
                          "objects");
}

Peer PeerOf(const zmq::message_t& frame) {
  const char* user_id = zmq_msg_gets(const_cast<zmq_msg_t*>(frame.handle()), "User-Id");
  return Peer{user_id != nullptr ? user_id : ""};
}

}  // namespace atl::proto
