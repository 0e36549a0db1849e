#include "common/service/advertise.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace atl {

namespace {

constexpr std::string_view kTcp = "tcp://";
// Where the RM's own advertised address is looked for when it binds every interface: an
// address of TEST-NET-1 (RFC 5737), routed by the default route and never sent anything.
constexpr const char* kDefaultRouteProbe = "tcp://192.0.2.1:9";

// The host and port of "tcp://HOST:PORT"; the host keeps the brackets of an IPv6 address.
Result<std::pair<std::string, std::string>> SplitEndpoint(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  if (endpoint.compare(0, kTcp.size(), kTcp) != 0 || colon == std::string::npos ||
      colon < kTcp.size() || colon + 1 == endpoint.size()) {
    return InvalidArgument("'" + endpoint + "' is not a tcp://HOST:PORT endpoint");
  }
  return std::pair{endpoint.substr(kTcp.size(), colon - kTcp.size()), endpoint.substr(colon + 1)};
}

// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

bool IsWildcardHost(std::string_view host) {
  return host.empty() || host == "*" || host == "0.0.0.0" || host == "::" || host == "[::]";
}

Result<std::string> EndpointHost(const std::string& endpoint) {
  ATOLL_ASSIGN_OR_RETURN(auto parts, SplitEndpoint(endpoint));
  std::string& host = parts.first;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

Status CheckAdvertised(std::string_view what, const std::string& endpoint) {
  auto parts = SplitEndpoint(endpoint);
  if (!parts.ok()) return parts.status().WithContext(what);
  auto refuse = [&](std::string_view why) {
    return InvalidArgument(fmt::format("{} '{}' {}", what, endpoint, why));
  };
  if (IsWildcardHost(parts->first)) return refuse("names no host a peer can connect to");
  const std::string& port = parts->second;
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) == 0 || std::stoi(port) > 65535) {
    return refuse("has no port in 1-65535");
  }
  return Status::Ok();
}

Result<std::string> WithHost(const std::string& endpoint, const std::string& host) {
  ATOLL_ASSIGN_OR_RETURN(auto parts, SplitEndpoint(endpoint));
  const bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  return std::string(kTcp) + (ipv6 ? "[" + host + "]" : host) + ":" + parts.second;
}

Result<std::string> RoutingAddress(const std::string& endpoint) {
  ATOLL_ASSIGN_OR_RETURN(const std::string host, EndpointHost(endpoint));
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), "9", &hints, &found); rc != 0) {
    return InvalidArgument(
        fmt::format("cannot resolve '{}' to an IPv4 address: {}", host, gai_strerror(rc)));
  }
  const sockaddr_in target = *reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  freeaddrinfo(found);
  const Fd udp{socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
  if (udp.fd < 0) return Unavailable(fmt::format("socket: {}", std::strerror(errno)));
  // connect() on a UDP socket only picks the route and the source address.
  if (connect(udp.fd, reinterpret_cast<const sockaddr*>(&target), sizeof target) != 0) {
    return Unavailable(
        fmt::format("no route from this machine to {}: {}", host, std::strerror(errno)));
  }
  sockaddr_in local{};
  socklen_t length = sizeof local;
  if (getsockname(udp.fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) {
    return Unavailable(fmt::format("getsockname: {}", std::strerror(errno)));
  }
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &local.sin_addr, text, sizeof text);
  return std::string(text);
}

Result<std::string> AdvertisedEndpoint(const std::string& bound, const ClusterConfig& config) {
  if (!config.advertise_host.empty()) return WithHost(bound, config.advertise_host);
  ATOLL_ASSIGN_OR_RETURN(const std::string bound_host, EndpointHost(bound));
  if (!IsWildcardHost(bound_host)) return bound;
  ATOLL_ASSIGN_OR_RETURN(const std::string rm_host, EndpointHost(config.rm_endpoint));
  const std::string towards = IsWildcardHost(rm_host) ? kDefaultRouteProbe : config.rm_endpoint;
  auto address = RoutingAddress(towards);
  if (!address.ok()) {
    return Unavailable(
        fmt::format("{} binds every interface, and which one to advertise is not "
                    "known ({}); pass --advertise ADDRESS",
                    bound, address.status().message()));
  }
  return WithHost(bound, *address);
}

Result<ServiceEndpoint> BindAndAdvertise(zmq::socket_t& socket, const std::string& address,
                                         const ClusterConfig& config, net::Audience audience) {
  ServiceEndpoint endpoint;
  ATOLL_ASSIGN_OR_RETURN(endpoint.bound, net::Bind(socket, address, audience));
  ATOLL_ASSIGN_OR_RETURN(endpoint.advertised, AdvertisedEndpoint(endpoint.bound, config));
  return endpoint;
}

void AddReadyEndpoint(std::map<std::string, std::string>& ready, const std::string& key,
                      const ServiceEndpoint& endpoint) {
  ready[key] = endpoint.advertised;
  if (endpoint.bound != endpoint.advertised) ready["bind_" + key] = endpoint.bound;
}

}  // namespace atl
