// A ZeroMQ context whose sockets connect as one of the test cluster's own services (with the
// cluster's key pair from `keys_dir`), for tests that talk to services directly: raw
// requests, store statistics, the event stream. Plain text when the cluster is ("plain").
// The default keys directory is $ATOLL_KEYS, which the cluster fixture sets.
#pragma once

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "common/net/security.h"
#include "tests/status_matchers.h"

namespace atl::testing {

inline net::Credentials MemberCredentials(const std::string& keys_dir) {
  if (keys_dir.empty() || keys_dir == "plain") return {};
  auto credentials = net::ServiceCredentials(keys_dir);
  EXPECT_THAT(credentials, IsOk());
  return credentials.ok() ? *credentials : net::Credentials{};
}

inline std::string KeysFromEnvironment() {
  const char* keys = std::getenv("ATOLL_KEYS");
  return keys != nullptr ? keys : "";
}

class MemberContext : public net::KeyedContext {
 public:
  explicit MemberContext(const std::string& keys_dir = KeysFromEnvironment())
      : net::KeyedContext(MemberCredentials(keys_dir)) {}
};

}  // namespace atl::testing
