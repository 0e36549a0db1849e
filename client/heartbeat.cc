#include "client/heartbeat.h"

namespace atl {

ClientHeartbeat::ClientHeartbeat(const net::Credentials& credentials, uint64_t client_id,
                                 const std::string& rm_endpoint, std::chrono::milliseconds period)
    : sender_(HeartbeatSender::Shared(credentials, period)), client_id_(client_id) {
  sender_->Add(client_id_, rm_endpoint);
}

ClientHeartbeat::~ClientHeartbeat() { sender_->Remove(client_id_); }

void ClientHeartbeat::AddWatcher(const std::string& endpoint) {
  sender_->Add(client_id_, endpoint);
}

}  // namespace atl
