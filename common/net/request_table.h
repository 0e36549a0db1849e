// RequestTable: a service's requests dispatched from a table with one row per message kind
// it handles (the kinds are message_kinds.def's): who may send it, and the service's typed
// handler, which gets the body decoded as the row's message struct (its own, to move from).
// Dispatch checks the sender first (nothing from a sender that may not send it is even decoded),
// then decodes, then calls; a kind without a row is InvalidArgument ("the object store does not
// handle Compile messages"). The rows are a service's whole protocol, read in one place.
//
// Who may send a kind:
//   MaySend::Members("seal an object")  the cluster's services only; others are refused
//                                       PermissionDenied, naming the action
//                                       (proto::RequireMember).
//   MaySend::Anyone()                   any peer: a client, for requests about its own
//                                       objects, runs or liveness, which the handler checks
//                                       against the owner the body names (OwnerCache).
//
// Example:
//   requests_.Add<proto::SealObject>(MaySend::Members("seal an object"), &StoreService::OnSeal);
//   Status StoreService::OnSeal(proto::SealObject req, proto::Incoming& in);
//   ...
//   net::ServeRequests(socket_, events_, "error.store", rejected_,
//                      [this](proto::Incoming& in) { return requests_.Dispatch(*this, in); });
//
// Not thread-safe to change; built before the service serves, then only read.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "atoll/status.h"
#include "common/proto/codec.h"
#include "common/proto/peer.h"

namespace atl::net {

class MaySend {
 public:
  static MaySend Anyone() { return MaySend(false, ""); }
  // `action`: what the request does, for the refusal ("seal an object").
  static MaySend Members(std::string action) { return MaySend(true, std::move(action)); }

  Status Check(const proto::Peer& sender) const {
    return members_only_ ? proto::RequireMember(sender, action_) : Status::Ok();
  }

 private:
  MaySend(bool members_only, std::string action)
      : members_only_(members_only), action_(std::move(action)) {}
  bool members_only_;
  std::string action_;
};

template <typename Service>
class RequestTable {
 public:
  template <typename Message>
  using Handler = Status (Service::*)(Message request, proto::Incoming& in);

  // `service`: what the refusal of an unknown kind calls it ("the object store").
  explicit RequestTable(std::string service) : service_(std::move(service)) {}

  // The row of Message's kind; one per kind.
  template <typename Message>
  RequestTable& Add(MaySend who, Handler<Message> handler) {
    const size_t index = static_cast<size_t>(Message::kKind);
    if (rows_.size() <= index) rows_.resize(index + 1);
    rows_[index] = Row{std::move(who), [handler](Service& service, proto::Incoming& in) {
                         ATOLL_ASSIGN_OR_RETURN(Message request, in.header.As<Message>());
                         return (service.*handler)(std::move(request), in);
                       }};
    return *this;
  }

  // Checks who sent `in`, decodes it and hands it to its row's handler on `service`. A
  // handler replies itself and returns OK, or returns the error to reply with.
  Status Dispatch(Service& service, proto::Incoming& in) const {
    const size_t index = static_cast<size_t>(in.header.kind());
    if (index >= rows_.size() || !rows_[index].call) {
      return InvalidArgument(service_ + " does not handle " +
                             std::string(proto::KindName(in.header.kind())) + " messages");
    }
    const Row& row = rows_[index];
    ATOLL_RETURN_IF_ERROR(row.who.Check(in.sender));
    return row.call(service, in);
  }

 private:
  struct Row {
    MaySend who = MaySend::Anyone();
    std::function<Status(Service&, proto::Incoming&)> call;
  };
  std::string service_;
  std::vector<Row> rows_;  // by kind number
};

}  // namespace atl::net
