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
//   MaySend::OwningClient("create a     the client the body names (OwningClientOf: its
//     slice")                           client_id), or a member; checked once the body is
//                                       decoded, by the service's CheckOwningClient(sender,
//                                       client, action). A body that names no client (a
//                                       service's heartbeat) must come from a member
//                                       ("heartbeat as a service").
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
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "atoll/status.h"
#include "common/proto/codec.h"
#include "common/proto/peer.h"
#include "common/proto/protocol.h"

namespace atl::net {

// The row kind of MaySend::OwningClient: `action` names what the request does, for refusals.
struct OwningClientRow {
  std::string action;
};

class MaySend {
 public:
  static MaySend Anyone() { return MaySend(false, ""); }
  // `action`: what the request does, for the refusal ("seal an object").
  static MaySend Members(std::string action) { return MaySend(true, std::move(action)); }
  // `action`: what the request does ("create a slice"); see the header comment.
  static OwningClientRow OwningClient(std::string action) { return {std::move(action)}; }

  Status Check(const proto::Peer& sender) const {
    return members_only_ ? proto::RequireMember(sender, action_) : Status::Ok();
  }

 private:
  MaySend(bool members_only, std::string action)
      : members_only_(members_only), action_(std::move(action)) {}
  bool members_only_;
  std::string action_;
};

// The client a request comes from, for MaySend::OwningClient rows: the one its body names,
// or none for a request sent as a service (a service's heartbeat). InvalidArgument for a
// client's heartbeat whose id is not a client id.
template <typename Message>
Result<std::optional<uint64_t>> OwningClientOf(const Message& request) {
  return std::optional<uint64_t>(request.client_id);
}
inline Result<std::optional<uint64_t>> OwningClientOf(const proto::Heartbeat& beat) {
  if (beat.role != proto::Heartbeat::kClient) return std::optional<uint64_t>();
  ATOLL_ASSIGN_OR_RETURN(const uint64_t client, proto::HeartbeatClientId(beat));
  return std::optional<uint64_t>(client);
}

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
    return AddRow<Message>(std::move(who), [handler](Service& service, proto::Incoming& in) {
      ATOLL_ASSIGN_OR_RETURN(Message request, in.header.As<Message>());
      return (service.*handler)(std::move(request), in);
    });
  }

  // The row of Message's kind, sent by the client its body names (OwningClientOf) or a
  // member: Service::CheckOwningClient(sender, client, action) judges the first.
  template <typename Message>
  RequestTable& Add(OwningClientRow who, Handler<Message> handler) {
    return AddRow<Message>(
        MaySend::Anyone(), [who, handler](Service& service, proto::Incoming& in) -> Status {
          ATOLL_ASSIGN_OR_RETURN(Message request, in.header.As<Message>());
          ATOLL_ASSIGN_OR_RETURN(const std::optional<uint64_t> client, OwningClientOf(request));
          ATOLL_RETURN_IF_ERROR(
              client ? service.CheckOwningClient(in.sender, *client, who.action)
                     : proto::RequireMember(in.sender, who.action + " as a service"));
          return (service.*handler)(std::move(request), in);
        });
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
  using Call = std::function<Status(Service&, proto::Incoming&)>;
  struct Row {
    MaySend who = MaySend::Anyone();
    Call call;
  };

  template <typename Message>
  RequestTable& AddRow(MaySend who, Call call) {
    const size_t index = static_cast<size_t>(Message::kKind);
    if (rows_.size() <= index) rows_.resize(index + 1);
    rows_[index] = Row{std::move(who), std::move(call)};
    return *this;
  }

  std::string service_;
  std::vector<Row> rows_;  // by kind number
};

}  // namespace atl::net
