#include "client/store_calls.h"

#include <algorithm>

namespace atl {

std::chrono::milliseconds TimeLeft(Deadline deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now()));
}

Result<proto::Incoming> AwaitAnyReply(net::Requester& store, std::set<uint64_t>& requests,
                                      Deadline deadline) {
  // A store that refused this client's key says so in its handshake: looked at every
  // kRefusalCheck, so that the wait ends then rather than at its deadline.
  constexpr auto kRefusalCheck = std::chrono::milliseconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    ATOLL_ASSIGN_OR_RETURN(
        auto frames, net::RecvFrames(store.socket(), std::min(TimeLeft(deadline), kRefusalCheck)));
    if (!frames) {
      if (Status reachable = store.Reachable(); reachable.code() == Code::kPermissionDenied) {
        return reachable;
      }
      continue;
    }
    auto in = proto::ParseIncoming(std::move(*frames), /*routed=*/false);
    if (!in.ok() || requests.erase(in->header.request_id()) == 0) continue;
    if (in->header.kind() == proto::Kind::kError) {
      ATOLL_ASSIGN_OR_RETURN(const proto::Error error, in->header.As<proto::Error>());
      return proto::FromError(error);
    }
    return in;
  }
  ATOLL_RETURN_IF_ERROR(store.Reachable());
  return DeadlineExceeded(fmt::format("no reply from the object store at {}", store.endpoint()));
}

Result<proto::Incoming> AwaitReply(net::Requester& store, uint64_t request, Deadline deadline) {
  std::set<uint64_t> requests{request};
  return AwaitAnyReply(store, requests, deadline);
}

Status AwaitOks(net::Requester& store, std::set<uint64_t> requests, Deadline deadline) {
  while (!requests.empty()) {
    ATOLL_RETURN_IF_ERROR(AwaitAnyReply(store, requests, deadline).status());
  }
  return Status::Ok();
}

}  // namespace atl
