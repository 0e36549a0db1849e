// The address a service advertises: the interface that routes to the RM when it binds every
// interface (loopback for an RM on loopback), what --advertise says, or what it bound; never
// a wildcard.
#include "common/service/advertise.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <gtest/gtest.h>
#include "tests/status_matchers.h"

namespace atl {
namespace {

// A non-loopback IPv4 address of an interface that is up, or "" when there is none.
std::string SomeOutsideAddress() {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "";
  std::string found;
  for (const ifaddrs* i = all; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text,
              sizeof text);
    found = text;
  }
  freeifaddrs(all);
  return found;
}

ClusterConfig WithRm(const std::string& rm_endpoint, const std::string& advertise = "") {
  ClusterConfig config;
  config.rm_endpoint = rm_endpoint;
  config.advertise_host = advertise;
  return config;
}

TEST(RoutingAddressTest, AnRmOnLoopbackIsReachedFromLoopback) {
  for (const char* rm : {"tcp://127.0.0.1:5550", "tcp://localhost:5550", "tcp://127.0.0.1:*"}) {
    auto address = RoutingAddress(rm);
    ASSERT_THAT(address, IsOk()) << rm << ": " << address.status().ToString();
    EXPECT_EQ(*address, "127.0.0.1") << rm;
  }
}

TEST(RoutingAddressTest, AnInterfacesOwnAddressRoutesFromItself) {
  const std::string outside = SomeOutsideAddress();
  if (outside.empty()) GTEST_SKIP() << "this machine has no IPv4 interface besides loopback";
  auto address = RoutingAddress("tcp://" + outside + ":5550");
  ASSERT_THAT(address, IsOk());
  EXPECT_EQ(*address, outside);
}

TEST(RoutingAddressTest, WhatIsNoEndpointOrNoHostIsRefused) {
  for (const char* bad : {"ipc:///tmp/rm", "tcp://127.0.0.1", "127.0.0.1:5550", "tcp://:5550"}) {
    auto address = RoutingAddress(bad);
    ASSERT_FALSE(address.ok()) << bad;
    EXPECT_EQ(address.status().code(), Code::kInvalidArgument) << bad;
  }
  auto unknown = RoutingAddress("tcp://no-such-host.invalid:5550");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), Code::kInvalidArgument) << unknown.status().ToString();
}

TEST(AdvertisedEndpointTest, AWildcardBindAdvertisesTheAddressRoutingToTheRm) {
  auto advertised = AdvertisedEndpoint("tcp://0.0.0.0:4100", WithRm("tcp://127.0.0.1:5550"));
  ASSERT_THAT(advertised, IsOk());
  EXPECT_EQ(*advertised, "tcp://127.0.0.1:4100");

  const std::string outside = SomeOutsideAddress();
  if (outside.empty()) GTEST_SKIP() << "this machine has no IPv4 interface besides loopback";
  advertised = AdvertisedEndpoint("tcp://0.0.0.0:4100", WithRm("tcp://" + outside + ":5550"));
  ASSERT_THAT(advertised, IsOk());
  EXPECT_EQ(*advertised, "tcp://" + outside + ":4100");
}

TEST(AdvertisedEndpointTest, AGivenAddressWinsAndABoundInterfaceIsKept) {
  auto given = AdvertisedEndpoint("tcp://0.0.0.0:4100", WithRm("tcp://127.0.0.1:5550", "10.9.8.7"));
  ASSERT_THAT(given, IsOk());
  EXPECT_EQ(*given, "tcp://10.9.8.7:4100");
  auto kept = AdvertisedEndpoint("tcp://127.0.0.1:4100", WithRm("tcp://10.0.0.1:5550"));
  ASSERT_THAT(kept, IsOk());
  EXPECT_EQ(*kept, "tcp://127.0.0.1:4100");
}

// The RM itself binding every interface has no RM to route to: the default route says
// which address, or, without one, --advertise must. A wildcard never comes out.
TEST(AdvertisedEndpointTest, TheRmOnEveryInterfaceNeverAdvertisesAWildcard) {
  auto advertised = AdvertisedEndpoint("tcp://0.0.0.0:5550", WithRm("tcp://0.0.0.0:5550"));
  if (!advertised.ok()) {
    EXPECT_EQ(advertised.status().code(), Code::kUnavailable) << advertised.status().ToString();
    EXPECT_NE(advertised.status().message().find("--advertise"), std::string::npos);
    return;
  }
  auto host = EndpointHost(*advertised);
  ASSERT_THAT(host, IsOk());
  EXPECT_FALSE(IsWildcardHost(*host)) << *advertised;
}

TEST(EndpointHostTest, HostsAreReplacedWithTheirPortKept) {
  EXPECT_EQ(EndpointHost("tcp://10.0.0.1:5550").value(), "10.0.0.1");
  EXPECT_EQ(EndpointHost("tcp://[::1]:5550").value(), "::1");
  EXPECT_EQ(WithHost("tcp://*:5550", "10.0.0.2").value(), "tcp://10.0.0.2:5550");
  EXPECT_EQ(WithHost("tcp://0.0.0.0:*", "eth0").value(), "tcp://eth0:*");
  EXPECT_EQ(WithHost("tcp://127.0.0.1:5550", "fd00::2").value(), "tcp://[fd00::2]:5550");
  for (const char* wildcard : {"*", "0.0.0.0", "::", "[::]", ""}) {
    EXPECT_TRUE(IsWildcardHost(wildcard)) << wildcard;
  }
  EXPECT_FALSE(IsWildcardHost("127.0.0.1"));
}

}  // namespace
}  // namespace atl
