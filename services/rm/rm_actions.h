// RmActions: what one decision of the RM's controller (controller.h) asks its shell
// (RmService) to do, in the order it must be done: replies and notices to send, events to
// publish, the state file to write. The controller decides without sockets; the shell
// carries the list out, so that a unit test reads what would be sent instead of sending it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/net/event_fields.h"
#include "common/proto/protocol.h"

namespace atl::rm {

// Every message the RM sends on its own or in reply.
using RmMessage =
    std::variant<proto::Ok, proto::HelloClientReply, proto::SliceInfo, proto::RegisterExecutorReply,
                 proto::RegisterFunctionReply, proto::DrainHostReply, proto::Error, proto::Compile,
                 proto::ServiceChanged, proto::HostChanged, proto::SliceRemapped,
                 proto::OwnersKnown>;

// The answer to the request being handled; held by the shell until a change of the state
// is written (a client must not hear of what a restarted RM would have forgotten).
struct ReplyAction {
  RmMessage message;
};
// To a peer connected to the RM's request socket (an executor or a client), by its routing
// id. `request_id` 0: a notice. `to` names the peer in the shell's log when the send fails;
// a Compile that cannot be sent is answered to the controller as failed (CompileUnsent).
struct SendAction {
  std::string routing_id;
  uint64_t request_id = 0;
  RmMessage message;
  std::string to;
};
// A notice to an object store or an island scheduler at `endpoint`, over a socket of the
// RM's own: they do not keep a connection to the RM's request socket open.
enum class ServiceKind { kStore, kScheduler };
struct TellAction {
  ServiceKind service = ServiceKind::kStore;
  std::string endpoint;
  RmMessage message;
};
struct PublishAction {
  std::string topic;
  EventFields fields;
};
// Write the state file now (and send the replies held for it), before what follows.
struct WriteStateAction {};
// Append registered function `id` to the state file (state_file.h: AppendFunction).
struct AppendFunctionAction {
  uint64_t id = 0;
};

using RmAction = std::variant<ReplyAction, SendAction, TellAction, PublishAction, WriteStateAction,
                              AppendFunctionAction>;

struct RmActions {
  std::vector<RmAction> list;
  // The state changed in what persists of it: the state file is rewritten by the end of the
  // loop's turn (before any reply held meanwhile goes out).
  bool state_changed = false;

  void Reply(RmMessage message) { list.push_back(ReplyAction{std::move(message)}); }
  void Send(std::string routing_id, uint64_t request_id, RmMessage message, std::string to) {
    list.push_back(
        SendAction{std::move(routing_id), request_id, std::move(message), std::move(to)});
  }
  void Tell(ServiceKind service, std::string endpoint, RmMessage message) {
    list.push_back(TellAction{service, std::move(endpoint), std::move(message)});
  }
  void Publish(std::string_view topic, EventFields fields) {  // topics::k* (event_topics.h)
    list.push_back(PublishAction{std::string(topic), std::move(fields)});
  }
  void SaveState() { state_changed = true; }
  void WriteStateNow() {
    state_changed = true;
    list.push_back(WriteStateAction{});
  }
  void AppendFunction(uint64_t id) { list.push_back(AppendFunctionAction{id}); }
  // Appends `more`'s actions after these.
  void Append(RmActions more);

  // For tests and logs: the topics published, in order.
  std::vector<std::string> Topics() const;
  // For tests: the messages of type T sent or told (not replied), in order.
  template <typename T>
  std::vector<T> Sent() const {
    std::vector<T> sent;
    for (const RmAction& action : list) {
      const RmMessage* message = nullptr;
      if (const auto* send = std::get_if<SendAction>(&action)) message = &send->message;
      if (const auto* tell = std::get_if<TellAction>(&action)) message = &tell->message;
      if (message != nullptr && std::holds_alternative<T>(*message)) {
        sent.push_back(std::get<T>(*message));
      }
    }
    return sent;
  }
};

}  // namespace atl::rm
