// A Controller on a clock moved by hand, and a cluster to drive it with: island "a" with
// hosts a0, a1, a2 (two devices each) and its scheduler, and a client. The helpers send
// what the real peers would and hand back what the controller decided.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "services/rm/controller.h"
#include "tests/status_matchers.h"

namespace atl::rm {

using namespace std::chrono_literals;

// The replies in `actions`, in order.
inline std::vector<RmMessage> Replies(const RmActions& actions) {
  std::vector<RmMessage> replies;
  for (const RmAction& action : actions.list) {
    if (const auto* reply = std::get_if<ReplyAction>(&action)) replies.push_back(reply->message);
  }
  return replies;
}

// The sends of `actions` carrying a T, in order.
template <typename T>
std::vector<SendAction> SendsOf(const RmActions& actions) {
  std::vector<SendAction> sends;
  for (const RmAction& action : actions.list) {
    const auto* send = std::get_if<SendAction>(&action);
    if (send != nullptr && std::holds_alternative<T>(send->message)) sends.push_back(*send);
  }
  return sends;
}

// The position in `actions` of the first action `is` holds for; the list's size if none.
template <typename Pred>
size_t IndexOf(const RmActions& actions, Pred is) {
  for (size_t i = 0; i < actions.list.size(); ++i) {
    if (is(actions.list[i])) return i;
  }
  return actions.list.size();
}

// The value of field `key` of the first event of `topic`; "" when there is none.
inline std::string FieldOf(const RmActions& actions, const std::string& topic,
                           const std::string& key) {
  for (const RmAction& action : actions.list) {
    const auto* event = std::get_if<PublishAction>(&action);
    if (event == nullptr || event->topic != topic) continue;
    for (const auto& [name, value] : event->fields) {
      if (name != key) continue;
      if (const auto* text = std::get_if<std::string>(&value)) return *text;
      if (const auto* number = std::get_if<uint64_t>(&value)) return std::to_string(*number);
    }
  }
  return "";
}

class ControllerTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kHeartbeatMs = 100;
  static constexpr uint32_t kLiveness = 3;  // a lapse of 300 ms
  static constexpr auto kLapse = 300ms;

  static ControllerOptions Options() {
    ControllerOptions options;
    options.heartbeat_ms = kHeartbeatMs;
    options.liveness = kLiveness;
    options.configured_islands = {"a"};
    options.compile_timeout = 1s;
    return options;
  }

  // The RM must not find its own checks late (StallGuard): the clock starts where it does.
  const Clock::time_point t0_ = Clock::time_point{} + 1h;
  Clock::time_point now_ = t0_;
  Controller rm_{Options(), MakeSpreadEvenlyPolicy(), t0_};
  uint64_t next_request_ = 1;

  // A request from `routing_id` on a plain-text connection (a member, as every peer is).
  Caller From(const std::string& routing_id) { return {routing_id, next_request_++, {}}; }

  static RmActions Ok(Result<RmActions> decided) {
    EXPECT_THAT(decided, IsOk());
    return decided.ok() ? std::move(*decided) : RmActions{};
  }

  static proto::RegisterExecutor Executor(const std::string& host, uint32_t devices = 2) {
    proto::RegisterExecutor req{
        host, "a", "tcp://" + host + ":1", "tcp://" + host + ":2", "tcp://" + host + ":3", {}};
    for (uint32_t i = 0; i < devices; ++i) req.devices.push_back({"cpu", 1 << 20});
    return req;
  }
  RmActions RegisterHost(const std::string& host, uint32_t devices = 2) {
    return Ok(rm_.RegisterExecutor(Executor(host, devices), From("exec-" + host), now_));
  }
  RmActions RegisterScheduler() {
    return Ok(rm_.RegisterScheduler({"a", "tcp://sched:1"}, From("sched"), now_));
  }
  uint64_t Hello(const std::string& routing_id = "client") {
    RmActions hello = Ok(rm_.HelloClient({"test"}, From(routing_id), now_));
    return std::get<proto::HelloClientReply>(Replies(hello).at(0)).client_id;
  }
  proto::SliceInfo CreateSlice(uint64_t client, uint32_t devices) {
    RmActions created = Ok(rm_.CreateSlice({client, devices, "", ""}, From("client"), now_));
    return std::get<proto::SliceInfo>(Replies(created).at(0));
  }
  // A function for a slice of `shards` devices.
  static ir::FunctionDef Doubling(int shards) {
    ir::FunctionDef def;
    def.name = "double";
    def.inputs = {ir::SplitType(DType::kF32, {4 * static_cast<int64_t>(shards), 4}, 0)};
    def.ops = {{ir::OpCode::kMul,
                {{ir::Operand::kInput, 0}, {ir::Operand::kScalar, 0, 2.0}},
                0.0,
                def.inputs[0]}};
    def.outputs = {{ir::Operand::kOp, 0}};
    def.mesh = {shards};
    return def;
  }
  // Every Compile in `actions` answered OK; returns what the answers decided.
  RmActions AnswerCompiles(const RmActions& actions) {
    RmActions decided;
    for (const SendAction& compile : SendsOf<proto::Compile>(actions)) {
      decided.Append(rm_.CompileAnswered(compile.request_id, Status::Ok()));
    }
    return decided;
  }
  // Registers a function on `slice`, compiled everywhere; returns its id.
  uint64_t RegisterFunction(uint64_t client, const proto::SliceInfo& slice) {
    const auto shards = static_cast<int>(slice.devices.size());
    RmActions sent =
        Ok(rm_.RegisterFunction({client, slice.slice_id, Doubling(shards)}, From("client"), now_));
    RmActions answered = AnswerCompiles(sent);
    return std::get<proto::RegisterFunctionReply>(
               SendsOf<proto::RegisterFunctionReply>(answered).at(0).message)
        .function_id;
  }
  // The hosts of a0..a2 and the scheduler, which heartbeat; a client connected.
  void StartCluster() {
    for (const char* host : {"a0", "a1", "a2"}) {
      RegisterHost(host);
      Heartbeat(proto::Heartbeat::kStore, host, 1);
    }
    RegisterScheduler();
  }
  RmActions Heartbeat(uint8_t role, const std::string& id, uint64_t instance = 0) {
    const std::string routing = role == proto::Heartbeat::kExecutor ? "exec-" + id : "beat-" + id;
    return Ok(rm_.Heartbeat({role, id, instance, 0}, From(routing), now_));
  }
  // Moves the clock on by `span` in the RM's liveness checks (four per heartbeat period),
  // every service but those in `silent` heartbeating each period, and clients `heard`;
  // returns what the checks decided.
  RmActions Advance(Clock::duration span, const std::set<std::string>& silent = {},
                    const std::vector<uint64_t>& heard = {}) {
    RmActions decided;
    const Clock::time_point until = now_ + span;
    const auto check = LivenessCheckPeriod(kHeartbeatMs);
    Clock::time_point next_beat = now_;
    while (now_ + check <= until) {
      now_ += check;
      if (now_ >= next_beat) {
        for (const auto& [name, host] : rm_.state().hosts) {
          if (!silent.count(name)) Heartbeat(proto::Heartbeat::kExecutor, name);
          if (!silent.count(name + ".store")) {
            Heartbeat(proto::Heartbeat::kStore, name, host.store_instance);
          }
        }
        if (!silent.count("scheduler")) Heartbeat(proto::Heartbeat::kScheduler, "a");
        for (uint64_t client : heard) {
          Heartbeat(proto::Heartbeat::kClient, std::to_string(client));
        }
        next_beat = now_ + std::chrono::milliseconds(kHeartbeatMs);
      }
      decided.Append(rm_.CheckLiveness(now_));
    }
    return decided;
  }
};

}  // namespace atl::rm
