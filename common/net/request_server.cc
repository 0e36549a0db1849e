#include "common/net/request_server.h"

#include <spdlog/spdlog.h>

#include "common/net/transport.h"

namespace atl::net {

int ServeRequests(zmq::socket_t& router, EventPublisher& events, const std::string& error_topic,
                  const RequestHandler& handle, int max_messages) {
  int handled = 0;
  for (; handled < max_messages; ++handled) {
    auto in = RecvRequest(router);  // answers unparseable messages itself
    if (!in.ok()) {
      spdlog::warn("rejected a message: {}", in.status().ToString());
      events.Publish(error_topic, {{"kind", std::string("unreadable")},
                                   {"code", std::string(CodeName(in.status().code()))},
                                   {"error", in.status().message()}});
      continue;
    }
    if (!in->has_value()) break;
    proto::Incoming& request = **in;
    const Status status = handle(request);
    if (status.ok()) continue;
    const std::string kind(proto::KindName(request.header.kind()));
    spdlog::debug("{} {}: {}", kind, request.header.request_id(), status.ToString());
    events.Publish(error_topic, {{"kind", kind},
                                 {"code", std::string(CodeName(status.code()))},
                                 {"error", status.message()}});
    const Status sent = ReplyError(router, request, status);
    if (!sent.ok()) spdlog::debug("error reply to {} not sent: {}", kind, sent.ToString());
  }
  return handled;
}

}  // namespace atl::net
