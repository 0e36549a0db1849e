#include "client/store_calls.h"

#include <algorithm>

namespace atl {

std::chrono::milliseconds TimeLeft(Deadline deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now()));
}

Result<proto::Incoming> AwaitReply(net::Requester& store, uint64_t request, Deadline deadline) {
  while (std::chrono::steady_clock::now() < deadline) {
    ATOLL_ASSIGN_OR_RETURN(auto frames, net::RecvFrames(store.socket(), TimeLeft(deadline)));
    if (!frames) break;
    auto in = proto::ParseIncoming(std::move(*frames), /*routed=*/false);
    if (!in.ok() || in->header.request_id() != request) continue;
    if (in->header.kind() == proto::Kind::kError) {
      ATOLL_ASSIGN_OR_RETURN(const proto::Error error, in->header.As<proto::Error>());
      return proto::FromError(error);
    }
    return in;
  }
  ATOLL_RETURN_IF_ERROR(store.Reachable());
  return DeadlineExceeded(fmt::format("no reply from the object store at {}", store.endpoint()));
}

}  // namespace atl
