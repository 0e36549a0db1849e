// How a process's sockets authenticate: plain text, or CURVE with the keys given to its
// ZeroMQ context. Every socket atoll makes goes through MakeSocket, Bind and Connect
// (transport.h), which apply what the socket's context was given here:
//  - a connecting socket presents `own` and expects the server to hold `server_key`;
//  - a bound socket is a CURVE server with `own` (a service's own pair is the cluster's),
//    and has each peer's key checked by the process's ZAP handler (zap_handler.h) for the
//    audience the bind names.
// A context given no credentials makes plain-text sockets, as do contexts of tests that
// say so.
#pragma once

#include <string>

#include <zmq.hpp>

#include "atoll/status.h"
#include "common/net/curve_keys.h"
#include "common/proto/peer.h"

namespace atl::net {

struct Credentials {
  KeyPair own;             // empty public_key: plain text
  std::string server_key;  // the cluster's public key
  bool curve() const { return !own.public_key.empty(); }
};

// Who may connect to a bound socket.
enum class Audience {
  kEveryone,  // the cluster's members and the allowed clients
  kMembers,   // the cluster's services only (the data plane, the event bus input)
};

// The ZAP domains naming each audience, which the ZAP handler tells apart.
inline constexpr const char* kZapDomainEveryone = "atoll";
inline constexpr const char* kZapDomainMembers = "atoll-members";

// Gives `context`'s sockets these credentials from now on (sockets made before keep
// theirs). Thread-safe. Forget() before the context is destroyed.
void SetCredentials(zmq::context_t& context, Credentials credentials);
void ForgetCredentials(zmq::context_t& context);
// The credentials `context` was given; plain text when none.
Credentials CredentialsOf(zmq::context_t& context);

// A context whose sockets use `credentials` (plain text when empty), forgotten with it.
class KeyedContext : public zmq::context_t {
 public:
  explicit KeyedContext(Credentials credentials) { SetCredentials(*this, std::move(credentials)); }
  ~KeyedContext() { ForgetCredentials(*this); }
};

// Credentials for a service: the cluster's key pair in `keys_dir`, or plain text when
// `keys_dir` is empty.
Result<Credentials> ServiceCredentials(const std::string& keys_dir);
// Credentials for a client: key pair `name` of `keys_dir` and the cluster's public key.
Result<Credentials> ClientCredentials(const std::string& keys_dir, const std::string& name);

// The credentials a client uses. `keys_dir`: a keys directory, "plain" for plain text, or
// empty: $ATOLL_KEYS (the same), else <DefaultStateDir()>/keys when it holds a cluster
// public key, else plain text. `key_name`: empty: $ATOLL_CLIENT_KEY, else "default".
Result<Credentials> FindClientCredentials(std::string keys_dir, std::string key_name);

}  // namespace atl::net
