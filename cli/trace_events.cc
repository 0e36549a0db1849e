#include "cli/trace_events.h"

#include <algorithm>
#include <array>
#include <limits>
#include <set>
#include <tuple>

#include "common/net/event_topics.h"

namespace atl::trace {

namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// Chrome's reserved colour names (trace viewer's color_scheme), chosen to be far apart.
constexpr std::array<std::string_view, 10> kPalette = {
    "thread_state_running",  // green
    "rail_response",         // blue
    "thread_state_iowait",   // orange
    "rail_animation",        // pink
    "rail_load",             // purple
    "yellow",
    "olive",
    "thread_state_runnable",  // light blue
    "grey",
    "startup",
};
constexpr std::string_view kErrorColor = "terrible";  // red

const Json* Field(const Json& fields, const char* name) {
  auto it = fields.find(name);
  return it == fields.end() ? nullptr : &*it;
}

Status Missing(const char* name, const char* want) {
  return InvalidArgument(std::string("field \"") + name + "\" is missing or not " + want);
}

Status GetU64(const Json& fields, const char* name, uint64_t& out) {
  const Json* v = Field(fields, name);
  if (v != nullptr && v->is_number_unsigned()) {
    out = v->get<uint64_t>();
    return Status::Ok();
  }
  if (v != nullptr && v->is_number_integer() && v->get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(v->get<int64_t>());
    return Status::Ok();
  }
  return Missing(name, "an unsigned integer");
}

Status GetI64(const Json& fields, const char* name, int64_t& out) {
  const Json* v = Field(fields, name);
  if (v != nullptr && v->is_number_unsigned() &&
      v->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    out = static_cast<int64_t>(v->get<uint64_t>());
    return Status::Ok();
  }
  if (v != nullptr && v->is_number_integer() && !v->is_number_unsigned()) {
    out = v->get<int64_t>();
    return Status::Ok();
  }
  return Missing(name, "an integer");
}

Status GetString(const Json& fields, const char* name, std::string& out) {
  const Json* v = Field(fields, name);
  if (v == nullptr || !v->is_string()) return Missing(name, "a string");
  out = v->get<std::string>();
  return Status::Ok();
}

OrderedJson Metadata(const char* name, int64_t pid, int64_t tid, OrderedJson args) {
  OrderedJson m;
  m["ph"] = "M";
  m["name"] = name;
  m["pid"] = pid;
  m["tid"] = tid;
  m["args"] = std::move(args);
  return m;
}

}  // namespace

std::string_view ClientColor(uint64_t client) { return kPalette[client % kPalette.size()]; }

Status TraceBuilder::Add(const Event& event) {
  const Json& f = event.fields;
  if (!f.is_object()) return InvalidArgument(event.topic + ": fields are not an object");
  if (event.topic == topics::kGangDone) {
    Gang g{};
    auto parse = [&]() -> Status {
      ATOLL_RETURN_IF_ERROR(GetU64(f, "run", g.run));
      ATOLL_RETURN_IF_ERROR(GetU64(f, "node", g.node));
      ATOLL_RETURN_IF_ERROR(GetU64(f, "gang", g.gang));
      ATOLL_RETURN_IF_ERROR(GetU64(f, "shard", g.shard));
      ATOLL_RETURN_IF_ERROR(GetU64(f, "device", g.device));
      ATOLL_RETURN_IF_ERROR(GetString(f, "host", g.host));
      ATOLL_RETURN_IF_ERROR(GetU64(f, "client", g.client));
      ATOLL_RETURN_IF_ERROR(GetI64(f, "start_us", g.start_us));
      return GetI64(f, "end_us", g.end_us);
    };
    if (Status s = parse(); !s.ok()) return s.WithContext("gang.done");
    gangs_.push_back(std::move(g));
    return Status::Ok();
  }
  if (event.topic == topics::kErrorGang) {
    GangError e{};
    auto parse = [&]() -> Status {
      ATOLL_RETURN_IF_ERROR(GetU64(f, "run", e.run));
      ATOLL_RETURN_IF_ERROR(GetU64(f, "node", e.node));
      ATOLL_RETURN_IF_ERROR(GetU64(f, "shard", e.shard));
      ATOLL_RETURN_IF_ERROR(GetString(f, "host", e.host));
      return GetI64(f, "ts_us", e.ts_us);
    };
    if (Status s = parse(); !s.ok()) return s.WithContext("error.gang");
    if (const Json* error = Field(f, "error"); error != nullptr && error->is_string()) {
      e.error = error->get<std::string>();
    }
    errors_.push_back(std::move(e));
    return Status::Ok();
  }
  if (event.topic == topics::kDeviceRegistered || event.topic == topics::kDeviceStats) {
    std::string host, island;
    if (GetString(f, "host", host).ok() && GetString(f, "island", island).ok()) {
      island_of_host_[host] = island;
    }
  }
  return Status::Ok();
}

size_t TraceBuilder::devices() const {
  std::set<uint64_t> ids;
  for (const Gang& g : gangs_) ids.insert(g.device);
  return ids.size();
}

OrderedJson TraceBuilder::ToJson() const {
  // Processes: every host named by a gang or an error, in (known island, island, host) order.
  auto island_of = [this](const std::string& host) -> std::string {
    auto it = island_of_host_.find(host);
    return it == island_of_host_.end() ? "" : it->second;
  };
  std::set<std::tuple<bool, std::string, std::string>> hosts;
  for (const Gang& g : gangs_) hosts.emplace(island_of(g.host).empty(), island_of(g.host), g.host);
  for (const GangError& e : errors_) {
    hosts.emplace(island_of(e.host).empty(), island_of(e.host), e.host);
  }
  std::map<std::string, int64_t> pid_of;
  OrderedJson events = OrderedJson::array();
  for (const auto& [unknown, island, host] : hosts) {
    const int64_t pid = static_cast<int64_t>(pid_of.size()) + 1;
    pid_of[host] = pid;
    events.push_back(
        Metadata("process_name", pid, 0, {{"name", unknown ? host : island + " / " + host}}));
    events.push_back(Metadata("process_sort_index", pid, 0, {{"sort_index", pid}}));
  }
  std::set<std::pair<int64_t, uint64_t>> threads;  // (pid, device)
  for (const Gang& g : gangs_) threads.emplace(pid_of[g.host], g.device);
  for (const auto& [pid, device] : threads) {
    const auto tid = static_cast<int64_t>(device);
    events.push_back(
        Metadata("thread_name", pid, tid, {{"name", "device " + std::to_string(device)}}));
    events.push_back(Metadata("thread_sort_index", pid, tid, {{"sort_index", tid}}));
  }

  // Time zero is the earliest start or error.
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const Gang& g : gangs_) origin = std::min(origin, g.start_us);
  for (const GangError& e : errors_) origin = std::min(origin, e.ts_us);
  if (gangs_.empty() && errors_.empty()) origin = 0;

  // (pid, tid, ts, json): gangs and errors, ordered by track and time.
  std::vector<std::tuple<int64_t, int64_t, int64_t, OrderedJson>> timed;
  for (const Gang& g : gangs_) {
    const int64_t pid = pid_of[g.host];
    const auto tid = static_cast<int64_t>(g.device);
    OrderedJson x;
    x["ph"] = "X";
    x["name"] = "run " + std::to_string(g.run) + " node " + std::to_string(g.node);
    x["cat"] = "gang";
    x["pid"] = pid;
    x["tid"] = tid;
    x["ts"] = g.start_us - origin;
    x["dur"] = std::max<int64_t>(g.end_us - g.start_us, 0);  // a clock step never goes back
    x["cname"] = ClientColor(g.client);
    x["args"] = {{"client", g.client},
                 {"run", g.run},
                 {"node", g.node},
                 {"gang", g.gang},
                 {"shard", g.shard}};
    timed.emplace_back(pid, tid, g.start_us - origin, std::move(x));
  }
  for (const GangError& e : errors_) {
    const int64_t pid = pid_of[e.host];
    OrderedJson i;
    i["ph"] = "i";
    i["s"] = "p";  // process-wide: error.gang does not name the device
    i["name"] = "error: run " + std::to_string(e.run) + " node " + std::to_string(e.node) +
                " shard " + std::to_string(e.shard);
    i["cat"] = "error";
    i["pid"] = pid;
    i["tid"] = 0;
    i["ts"] = e.ts_us - origin;
    i["cname"] = kErrorColor;
    i["args"] = {{"run", e.run}, {"node", e.node}, {"shard", e.shard}, {"error", e.error}};
    timed.emplace_back(pid, 0, e.ts_us - origin, std::move(i));
  }
  std::stable_sort(timed.begin(), timed.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a), std::get<2>(a)) <
           std::tie(std::get<0>(b), std::get<1>(b), std::get<2>(b));
  });
  for (auto& t : timed) events.push_back(std::move(std::get<3>(t)));

  OrderedJson out;
  out["traceEvents"] = std::move(events);
  out["displayTimeUnit"] = "ms";
  out["otherData"] = {{"generator", "atoll trace"},
                      {"origin_us", origin},
                      {"gangs", gangs_.size()},
                      {"errors", errors_.size()}};
  return out;
}

Result<Event> ParseJsonLine(std::string_view line) {
  Json j = Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("not JSON");
  if (!j.is_object()) return InvalidArgument("not a JSON object");
  auto topic = j.find("topic");
  if (topic == j.end() || !topic->is_string()) {
    return InvalidArgument("no string \"topic\"");
  }
  Event event;
  event.topic = topic->get<std::string>();
  j.erase("topic");
  event.fields = std::move(j);
  return event;
}

Status AddJsonLines(std::istream& in, TraceBuilder& builder) {
  size_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto event = ParseJsonLine(line);
    Status s = event.ok() ? builder.Add(*event) : event.status();
    if (!s.ok()) return s.WithContext("line " + std::to_string(number));
  }
  if (in.bad()) return Unavailable("read failed after line " + std::to_string(number));
  return Status::Ok();
}

}  // namespace atl::trace
