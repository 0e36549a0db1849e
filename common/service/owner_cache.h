// Whose clients and functions are, as the RM says (LookupOwners), remembered: the key a
// client connected with and the client a function belongs to never change. For services
// (object stores, schedulers) that check that a request's sender may act for the client it
// names, and that an object's owner is a live client before creating it.
//
// A client that connected and left is remembered as gone (ids are never reused), with the
// reason the RM gave, so that its late calls are told why they are refused; that memory is
// bounded, dropped whole when it grows past kMaxGoneClients, so that a flood of made-up ids
// cannot grow it. An id the RM has not given out yet is asked about each time:
// it may be the next client's (remembering it once refused a real client that a stray
// message had named before it connected).
//
// The RM tells every store and scheduler of each client as it connects, and each scheduler of
// the functions of its island as they are registered (OwnersKnown, Learn): a lookup is then
// only for what such a notice did not bring first (a client that connected before this
// service started, a notice held back in a full queue).
//
// Not thread-safe: one per service loop. A lookup blocks that loop for one RM round trip.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "atoll/status.h"
#include "common/net/transport.h"
#include "common/proto/peer.h"

namespace atl {

class OwnerCache {
 public:
  static constexpr size_t kMaxGoneClients = 4096;
  // Clients and functions learnt from notices, most of which never reach this service: the
  // memory is dropped whole past this many, as the gone clients' (a lookup fills it again).
  static constexpr size_t kMaxKnown = 16384;
  // A lookup of a client asks about this many ids from its on, and keeps the live ones.
  static constexpr uint64_t kLookupAhead = 64;

  // How long a lookup may block the loop of a service that heartbeats every `heartbeat` and
  // is taken for lost after `liveness` silent periods: 2 s at most, and never more than
  // half that lapse, so that an RM slow to answer fails the one request, not the service.
  static std::chrono::milliseconds LookupTimeout(std::chrono::milliseconds heartbeat,
                                                 uint32_t liveness);

  // `rm` null: no RM to ask (a store started alone, in tests): every client counts as live,
  // with no key.
  OwnerCache(net::Requester* rm, std::chrono::milliseconds timeout) : rm_(rm), timeout_(timeout) {}

  // The user id client `client` connected with. Cancelled when it has left the cluster (its
  // work and objects are being stopped and collected: asked for, not a fault), saying why
  // when the RM knows ("client 7 has left the cluster (goodbye)"); NotFound
  // when it never connected; Unavailable when the RM cannot be asked.
  Result<std::string> ClientUser(uint64_t client);
  // PermissionDenied unless `sender` may act for `client` (proto::RequireClient); Cancelled
  // or NotFound when `client` is not connected, as ClientUser. A member passes without a
  // lookup.
  Status CheckClient(const proto::Peer& sender, uint64_t client, std::string_view action);
  // CheckClient for a Goodbye, which also passes once `client` has left: a goodbye that
  // came after the RM dropped the client (its heartbeats late under load) still collects
  // what it left here, and a client gone has nothing left to protect. Unlike CheckClient, a
  // member's goodbye must name a client the RM gave out too.
  Status CheckGoodbye(const proto::Peer& sender, uint64_t client);
  // The client of each function of `functions` (0: no such function), asking the RM once
  // for those not known yet.
  Result<std::map<uint64_t, uint64_t>> FunctionClients(const std::vector<uint64_t>& functions);

  // What the RM said (OwnersKnown): InvalidArgument for lists of unequal lengths.
  Status Learn(const proto::OwnersKnown& known);
  // Learn from a request of kind OwnersKnown, which only a member may send (the RM). A
  // notice: the caller does not reply.
  Status LearnFrom(const proto::Incoming& in);

  // The client has gone (collected, said goodbye): ask again if it is named later.
  void ForgetClient(uint64_t client);

 private:
  Result<proto::Owners> Ask(proto::LookupOwners request);

  net::Requester* rm_;
  std::chrono::milliseconds timeout_;
  std::map<uint64_t, std::string> client_users_;
  std::map<uint64_t, std::string> gone_clients_;  // clients that connected and left: why
  std::map<uint64_t, uint64_t> function_clients_;
};

}  // namespace atl
