#include "services/rm/event_proxy.h"

#include <future>

#include <spdlog/spdlog.h>

#include "common/net/transport.h"

namespace atl::rm {

Status EventProxy::Start(const std::string& in_endpoint, const std::string& out_endpoint) {
  control_endpoint_ =
      "inproc://event-proxy-control-" + std::to_string(reinterpret_cast<uintptr_t>(this));
  std::promise<Status> bound;
  auto bound_future = bound.get_future();
  thread_ = std::thread([this, in_endpoint, out_endpoint, &bound] {
    zmq::socket_t in = net::MakeSocket(context_, zmq::socket_type::xsub);
    zmq::socket_t out = net::MakeSocket(context_, zmq::socket_type::xpub);
    zmq::socket_t control(context_, zmq::socket_type::pair);
    control.set(zmq::sockopt::linger, 0);
    // Only the cluster's services publish; clients may watch.
    auto in_bound = net::Bind(in, in_endpoint, net::Audience::kMembers);
    auto out_bound = net::Bind(out, out_endpoint);
    if (!in_bound.ok() || !out_bound.ok()) {
      bound.set_value(!in_bound.ok() ? in_bound.status() : out_bound.status());
      return;
    }
    in_endpoint_ = *in_bound;
    out_endpoint_ = *out_bound;
    control.bind(control_endpoint_);
    bound.set_value(Status::Ok());
    try {
      zmq::proxy_steerable(in, out, zmq::socket_ref(), control);
    } catch (const zmq::error_t& e) {
      if (e.num() != ETERM) spdlog::error("event proxy stopped: {}", e.what());
    }
  });
  Status status = bound_future.get();
  if (!status.ok()) {
    thread_.join();
    return status;
  }
  return Status::Ok();
}

void EventProxy::Stop() {
  if (!thread_.joinable()) return;
  try {
    zmq::socket_t control(context_, zmq::socket_type::pair);
    control.set(zmq::sockopt::linger, 0);
    control.connect(control_endpoint_);
    control.send(zmq::str_buffer("TERMINATE"), zmq::send_flags::none);
  } catch (const zmq::error_t& e) {
    spdlog::warn("could not stop the event proxy cleanly: {}", e.what());
  }
  thread_.join();
}

}  // namespace atl::rm
