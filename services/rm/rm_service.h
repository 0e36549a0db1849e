// The resource manager: the cluster's single controller for resources. It owns the
// islands, hosts and devices, the virtual slices and their mapping onto devices, the
// registry of compiled functions, and client and executor liveness.
//
// RmService is the shell: it owns the sockets, the event loop, the event publisher and the
// state file, dispatches each request from its table (MakeRequestTable: who may send it,
// its handler), and carries out what the Controller (controller.h), which takes every
// decision, returns.
//
// Threading: Run() owns the ROUTER socket and all state; every handler runs on that one
// loop. The event proxy runs on its own thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <zmq.hpp>

#include "common/net/event_loop.h"
#include "common/net/events.h"
#include "common/net/rejection_log.h"
#include "common/net/request_table.h"
#include "common/net/transport.h"
#include "common/proto/codec.h"
#include "common/service/advertise.h"
#include "common/service/config.h"
#include "services/rm/controller.h"
#include "services/rm/event_proxy.h"

namespace atl::rm {

class RmService {
 public:
  // `state_file` (empty: none) keeps the RM's state across restarts: read at Bind() when it
  // exists, rewritten on every change.
  RmService(zmq::context_t& context, ClusterConfig config, std::string state_file = "");

  // Loads the state file, binds the request socket and the event proxy. The bound
  // addresses are then known.
  Status Bind();
  // Serves until SIGINT/SIGTERM.
  void Run();

  // Valid after Bind(): where peers reach the RM and its event bus, and what it bound.
  const ServiceEndpoint& endpoint() const { return endpoint_; }
  const ServiceEndpoint& events_in() const { return events_in_; }
  const ServiceEndpoint& events_out() const { return events_out_; }

  // One request, as the loop dispatches it (requests_): refused unless its sender may send
  // it, else handled. Public for tests, which see refusals without a socket.
  Status Dispatch(proto::Incoming& in) { return requests_.Dispatch(*this, in); }
  // For MaySend::OwningClient rows: whether `sender` may act for `client`
  // (Controller::MayActFor).
  Status CheckOwningClient(const proto::Peer& sender, uint64_t client,
                           std::string_view action) const {
    return controller_.MayActFor(sender, client, action);
  }

 private:
  void OnRequest();
  // The requests it serves, one row each (who may send it, its handler): requests_.
  static net::RequestTable<RmService> MakeRequestTable();
  // A decision of the controller's on one kind of request.
  template <typename Request>
  using Decision = Result<RmActions> (Controller::*)(const Request&, const Caller&,
                                                     Clock::time_point);
  // The handler of most rows: carries out what the controller's `decide` returns; its error
  // is the request's answer.
  template <typename Request, Decision<Request> decide>
  Status Serve(Request req, proto::Incoming& in);
  // An executor's answer to a Compile (Ok or Error): never answered itself.
  Status OnCompileDone(proto::Ok done, proto::Incoming& in);
  Status OnCompileFailed(proto::Error failed, proto::Incoming& in);
  Status OnClusterStatus(proto::GetClusterStatus req, proto::Incoming& in);
  Status OnLookupOwners(proto::LookupOwners req, proto::Incoming& in);
  void CheckLiveness();

  // Carries out `actions` in order; the replies among them answer `in` (null: there is no
  // request being handled). Returns how the reply went, when it was sent at once. A Compile
  // that cannot be sent fails its registration or remap at once, and what that decides is
  // carried out in turn.
  Status Carry(RmActions actions, const proto::Incoming* in);
  void Carry(SendAction& send);
  void Carry(TellAction& tell);

  // Persistence (state_file.h, state_saving.cc): what persists of the controller's state
  // is saved after every change, a registered function by appending it alone
  // (SaveFunction); a failed write is logged and published, not fatal. A change marks
  // the state dirty; the FlushState that ends the turn (OnRequest, CheckLiveness) writes it
  // and then sends the answers Answer held meanwhile. LoadState() starts afresh when there
  // is no state file yet.
  Status LoadState();
  void FlushState();
  // Replies to `in` now, or, while a change to the state is not written yet, after it is.
  Status Answer(const proto::Incoming& in, const RmMessage& body);
  void SaveFunction(uint64_t id);
  void ReportSaveError(const Status& saved);

  zmq::context_t& context_;
  ClusterConfig config_;
  std::string state_file_;
  zmq::socket_t socket_;
  EventProxy proxy_;
  std::unique_ptr<EventPublisher> events_;
  net::RejectionLog rejected_;  // requests refused, logged rate-limited per peer
  EventLoop loop_;
  ServiceEndpoint endpoint_, events_in_, events_out_;

  Controller controller_;
  const net::RequestTable<RmService> requests_ = MakeRequestTable();
  bool state_dirty_ = false;
  struct HeldReply {
    net::Frames frames;
    proto::Kind kind;
    size_t first_counted;  // past the routing id (net::SendCounted)
  };
  std::vector<HeldReply> held_replies_;  // Answer's, until FlushState
  // To object stores and island schedulers, for HostChanged and OwnersKnown. A notice to one
  // that is gone or not reading is dropped once its queue is full rather than stall the RM:
  // any member may register a scheduler, for an island of its choosing.
  net::DealerPool stores_;
  net::DealerPool schedulers_;
};

}  // namespace atl::rm
