#include "common/net/request_server.h"

#include <spdlog/spdlog.h>

#include "common/net/transport.h"

namespace atl::net {

namespace {

// A routing id is 5 bytes unless the peer chose one (up to 255): a longer one is cut short,
// so that a line stays readable (peers alike in their first 16 bytes are counted together).
std::string PeerName(std::string_view routing_id) {
  constexpr size_t kShown = 16;
  if (routing_id.size() <= kShown) return "peer " + HexBytes(routing_id);
  return "peer " + HexBytes(routing_id.substr(0, kShown)) + "...";
}

}  // namespace

void ReportRejection(EventPublisher& events, const std::string& error_topic, RejectionLog& rejected,
                     std::string_view routing_id, proto::Kind kind, const Status& status) {
  const std::string name(proto::KindName(kind));
  rejected.Reject(PeerName(routing_id), status.WithContext(name));
  events.Publish(error_topic, {{"kind", name},
                               {"code", std::string(CodeName(status.code()))},
                               {"error", status.message()}});
}

int ServeRequests(zmq::socket_t& router, EventPublisher& events, const std::string& error_topic,
                  RejectionLog& rejected, const RequestHandler& handle, int max_messages) {
  int handled = 0;
  for (; handled < max_messages; ++handled) {
    std::string sender;
    auto in = RecvRequest(router, &sender);  // answers unparseable messages itself
    if (!in.ok()) {
      rejected.Reject(PeerName(sender), in.status());
      events.Publish(error_topic, {{"kind", std::string("unreadable")},
                                   {"code", std::string(CodeName(in.status().code()))},
                                   {"error", in.status().message()}});
      continue;
    }
    if (!in->has_value()) break;
    proto::Incoming& request = **in;
    const Status status = handle(request);
    if (status.ok()) continue;
    ReportRejection(events, error_topic, rejected,
                    request.routing_id ? request.routing_id->to_string_view() : "",
                    request.header.kind(), status);
    const Status sent = ReplyError(router, request, status);
    if (!sent.ok()) {
      spdlog::debug("error reply to {} not sent: {}", proto::KindName(request.header.kind()),
                    sent.ToString());
    }
  }
  rejected.Flush();
  return handled;
}

}  // namespace atl::net
