// Asking the RM as a member of the cluster, with the cluster's key pair, as the services do:
// `atoll start host` asks where the event bus is and whether its island has a scheduler,
// `atoll stop` drains a host. Plain text when `keys_dir` is empty.
#pragma once

#include <chrono>
#include <string>

#include "atoll/status.h"
#include "common/net/security.h"
#include "common/net/transport.h"

namespace atl {

template <typename Reply, typename Request>
Result<Reply> AskRmAsMember(const std::string& rm_endpoint, const std::string& keys_dir,
                            const Request& request, std::chrono::milliseconds timeout) {
  ATOLL_ASSIGN_OR_RETURN(net::Credentials credentials, net::ServiceCredentials(keys_dir));
  net::KeyedContext context(std::move(credentials));
  net::Requester rm(context, rm_endpoint);
  ATOLL_RETURN_IF_ERROR(rm.Connect(/*watch_handshakes=*/true));
  return rm.template Call<Reply>(request, timeout);
}

}  // namespace atl
