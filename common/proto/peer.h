// Who sent a message: the user id that the receiving process's ZAP handler gave the
// connection it came on (common/net/zap_handler.h). Never a field of the message itself,
// which the sender could write as it likes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <zmq.hpp>

#include "atoll/status.h"

namespace atl::proto {

// The user id of a peer holding the cluster's key, and the prefix of a client's
// ("client:NAME", NAME the allowed key file's stem).
inline constexpr const char* kMemberUserId = "member";
inline constexpr const char* kClientUserIdPrefix = "client:";

struct Peer {
  std::string user_id;  // "" on a plain-text connection, which proves nothing

  bool plain_text() const { return user_id.empty(); }
  // A service of this cluster. Plain text trusts every peer as one, as before CURVE.
  bool member() const { return plain_text() || user_id == kMemberUserId; }
  // A client's key name ("alice"); empty for members and plain text.
  std::string client_key() const;
  // "a cluster member", "client key alice" or "an unauthenticated peer", for messages.
  std::string Describe() const;
};

// PermissionDenied unless `sender` is a member; `action` says what it tried, for the
// message ("register an executor").
Status RequireMember(const Peer& sender, std::string_view action);
// PermissionDenied unless `sender` is a member or holds the key that client `client`
// connected with (`client_user_id`, "" when the client is unknown).
Status RequireClient(const Peer& sender, uint64_t client, const std::string& client_user_id,
                     std::string_view action);

// The user id ZeroMQ attached to a received frame.
Peer PeerOf(const zmq::message_t& frame);

}  // namespace atl::proto
