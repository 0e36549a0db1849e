// Which address a service puts in the endpoints it registers with the RM or publishes (its
// advertised address), as opposed to the address it binds. A service bound to one interface
// advertises that interface's address; one bound to every interface (0.0.0.0) advertises
// the address of the interface that routes to the RM, or what --advertise says. A wildcard
// is never advertised: no peer can connect to it.
//
// Example: bound "tcp://0.0.0.0:4100", the RM at "tcp://10.1.0.2:5550", this machine's
// interface towards it 10.1.0.7: advertised "tcp://10.1.0.7:4100".
#pragma once

#include <map>
#include <string>
#include <string_view>

#include <zmq.hpp>

#include "atoll/status.h"
#include "common/net/transport.h"
#include "common/service/config.h"

namespace atl {

// True for the hosts that bind every interface: "*", "0.0.0.0", "::", "[::]" and "".
bool IsWildcardHost(std::string_view host);

// The host of "tcp://HOST:PORT" (an IPv6 host without its brackets); InvalidArgument for
// anything else.
Result<std::string> EndpointHost(const std::string& endpoint);

// OK when `endpoint` is one a peer can connect to: tcp://HOST:PORT, HOST neither empty nor
// a wildcard, PORT 1-65535. InvalidArgument naming `what` (such as "its data endpoint")
// otherwise: for a service registering where it serves, refused there rather than failing
// every later connection to it.
Status CheckAdvertised(std::string_view what, const std::string& endpoint);

// `endpoint` ("tcp://HOST:PORT") with HOST replaced by `host`.
Result<std::string> WithHost(const std::string& endpoint, const std::string& host);

// The IPv4 address of the local interface that routes to `endpoint`'s host, found as the
// kernel would pick it: a UDP socket connect()ed there (which sends no packet) and asked
// getsockname(). "127.0.0.1" for an endpoint on loopback. InvalidArgument when the host
// does not resolve to an IPv4 address; Unavailable when no route leads there.
Result<std::string> RoutingAddress(const std::string& endpoint);

// The endpoint to advertise for a socket bound at `bound` ("tcp://HOST:PORT" as ZeroMQ
// reports it) under `config`: on config.advertise_host when set; `bound` itself when it
// names one interface; else on the address that routes to config.rm_endpoint, or, for the
// RM itself (its own endpoint a wildcard), to the default route. Unavailable, asking for
// --advertise, when there is no such route.
Result<std::string> AdvertisedEndpoint(const std::string& bound, const ClusterConfig& config);

// Where a service's socket listens, and where it tells its peers it does.
struct ServiceEndpoint {
  std::string bound;       // as ZeroMQ reports it: what a restart binds again
  std::string advertised;  // registered and published: what peers connect to
};

// Binds `socket` at `address` (net::Bind; a port of * picks a free one) and works out the
// endpoint to advertise for it (AdvertisedEndpoint).
Result<ServiceEndpoint> BindAndAdvertise(zmq::socket_t& socket, const std::string& address,
                                         const ClusterConfig& config,
                                         net::Audience audience = net::Audience::kEveryone);

// Adds an endpoint to a service's ready file: `key` = the advertised endpoint, which the
// launcher hands to peers, and, when the service bound another address (0.0.0.0, or one
// behind --advertise), `bind_<key>` = the bound one, which a restart binds again.
void AddReadyEndpoint(std::map<std::string, std::string>& ready, const std::string& key,
                      const ServiceEndpoint& endpoint);

}  // namespace atl
