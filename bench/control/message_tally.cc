#include "bench/control/message_tally.h"

#include <fmt/format.h>

#include "common/net/event_reader.h"
#include "common/net/events.h"
#include "common/net/sent_counters.h"
#include "common/net/transport.h"

namespace atl::bench {
namespace {

// "executor/h0" -> "executor"; the object store publishes as "objectstore/<host>".
std::string RoleOf(const std::string& src) {
  std::string role = src.substr(0, src.find('/'));
  return role == "objectstore" ? "store" : role;
}

const std::map<std::string, proto::Kind>& KindsByName() {
  static const auto* kinds = [] {
    auto* m = new std::map<std::string, proto::Kind>;
    for (uint16_t k = 0; k < 256; ++k) {
      const auto kind = static_cast<proto::Kind>(k);
      if (proto::KindName(kind) != "unknown") (*m)[std::string(proto::KindName(kind))] = kind;
    }
    return m;
  }();
  return *kinds;
}

Flows MinusFlows(const Flows& after, const Flows& before) {
  Flows diff;
  for (const auto& [name, a] : after) {
    auto b = before.find(name);
    const Flow d =
        b == before.end() ? a : Flow{a.messages - b->second.messages, a.bytes - b->second.bytes};
    if (d.messages != 0 || d.bytes != 0) diff[name] = d;
  }
  return diff;
}

}  // namespace

std::string ReceiverOf(proto::Kind kind) {
  using K = proto::Kind;
  switch (kind) {
    case K::kHeartbeat:
      // Executors beat to the RM; clients to the RM and every store and scheduler they use.
      return "rm/store/scheduler";
    case K::kRegisterExecutor:
    case K::kRegisterScheduler:
    case K::kHelloClient:
    case K::kCreateSlice:
    case K::kRegisterFunction:
    case K::kGetClusterStatus:
    case K::kGoodbye:
      return "rm";
    case K::kCompile:
    case K::kDispatch:
    case K::kTupleBatch:
    case K::kRunLoop:
    case K::kHostChanged:
      return "executor";
    case K::kSubmitProgram:
    case K::kGangDone:
    case K::kNodeReleased:
      return "scheduler";
    case K::kCancelRun:
      // Clients cancel runs at their schedulers, which pass it on to the run's executors.
      return "scheduler/executor";
    case K::kStoreHello:
    case K::kCreateObject:
    case K::kSealObject:
    case K::kPutObject:
    case K::kGetObject:
    case K::kReleaseObject:
    case K::kGetStoreStats:
      return "store";
    case K::kSliceRemapped:
    case K::kServiceChanged:
    case K::kSubmitReply:
    case K::kRunDone:
    case K::kRunFailed:
      return "client";
    default:
      return "reply";
  }
}

bool IsPeriodic(proto::Kind kind) { return kind == proto::Kind::kHeartbeat; }

void AddCounts(const std::string& sender, const std::map<std::string, uint64_t>& counts,
               Traffic& traffic) {
  for (const auto& [field, value] : counts) {
    const size_t dot = field.rfind('.');
    if (dot == std::string::npos) continue;
    const std::string kind_name = field.substr(0, dot);
    auto kind = KindsByName().find(kind_name);
    if (kind == KindsByName().end()) continue;
    Flows& flows = IsPeriodic(kind->second) ? traffic.periodic : traffic.caused;
    Flow& flow = flows[fmt::format("{}->{} {}", sender, ReceiverOf(kind->second), kind_name)];
    const std::string what = field.substr(dot + 1);
    if (what == "msgs") flow.messages += value;
    if (what == "bytes") flow.bytes += value;
  }
}

Traffic Minus(const Traffic& after, const Traffic& before) {
  return {MinusFlows(after.caused, before.caused), MinusFlows(after.periodic, before.periodic)};
}

MessageTally::MessageTally(zmq::context_t& context, std::string events_out, size_t services)
    : socket_(net::MakeSocket(context, zmq::socket_type::sub)),
      endpoint_(std::move(events_out)),
      services_(services) {}

Status MessageTally::Start() {
  socket_.set(zmq::sockopt::subscribe, "net.stats");
  return net::Connect(socket_, endpoint_);
}

Result<Traffic> MessageTally::Snapshot(std::chrono::milliseconds timeout) {
  const int64_t since_us = NowMicros();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::map<std::string, std::map<std::string, uint64_t>> reports;  // by src
  while (reports.size() < services_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return DeadlineExceeded(fmt::format("only {} of {} services reported net.stats within {} ms",
                                          reports.size(), services_, timeout.count()));
    }
    ATOLL_ASSIGN_OR_RETURN(auto frames, net::RecvFrames(socket_, left));
    if (!frames || frames->size() != 2) continue;
    ATOLL_ASSIGN_OR_RETURN(Event e, DecodeEvent((*frames)[0], (*frames)[1]));
    if (e.fields.value("ts_us", int64_t{0}) < since_us) continue;
    const std::string src = e.fields.value("src", std::string());
    if (reports.contains(src)) continue;
    auto& counts = reports[src];
    for (const auto& [key, value] : e.fields.items()) {
      if (value.is_number_unsigned()) counts[key] = value.get<uint64_t>();
    }
  }
  // Services that share a process (atoll-simhosts) report the same counters: one report
  // per process counts, as sent by the role of its services, or "simhosts" when they mix.
  std::map<uint64_t, std::pair<std::string, const std::map<std::string, uint64_t>*>> processes;
  for (const auto& [src, counts] : reports) {
    auto pid = counts.find("pid");
    const uint64_t key = pid == counts.end() ? processes.size() + (uint64_t{1} << 32) : pid->second;
    auto [it, first] = processes.try_emplace(key, RoleOf(src), &counts);
    if (!first && it->second.first != RoleOf(src)) it->second.first = "simhosts";
  }
  Traffic traffic;
  for (const auto& [pid, process] : processes) AddCounts(process.first, *process.second, traffic);
  std::map<std::string, uint64_t> mine;
  for (const auto& [kind, count] : net::SentCounts()) {
    const std::string name(proto::KindName(kind));
    mine[name + ".msgs"] = count.messages;
    mine[name + ".bytes"] = count.bytes;
  }
  AddCounts("client", mine, traffic);
  return traffic;
}

}  // namespace atl::bench
