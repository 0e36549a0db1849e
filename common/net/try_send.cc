#include "common/net/try_send.h"

namespace atl::net {

Result<bool> TrySend(zmq::socket_t& socket, Frames& frames, proto::Kind kind) {
  Status sent = SendCounted(socket, frames, kind, 0);
  if (sent.ok()) return true;
  if (frames.front().size() > 0) return false;  // refused before anything went
  return sent;
}

}  // namespace atl::net
