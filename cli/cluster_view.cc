#include "cli/cluster_view.h"

#include <algorithm>
#include <charconv>

#include "common/net/event_topics.h"

namespace atl {

namespace {

// Field readers that tolerate a missing key or an unexpected type (events come from other
// processes): they return `fallback` then.
uint64_t U64(const nlohmann::json& f, const char* key, uint64_t fallback = 0) {
  auto it = f.find(key);
  if (it == f.end()) return fallback;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer()) {
    const auto v = it->get<int64_t>();
    return v < 0 ? fallback : static_cast<uint64_t>(v);
  }
  if (it->is_number_float()) {
    const auto v = it->get<double>();
    return v < 0 ? fallback : static_cast<uint64_t>(v);
  }
  return fallback;
}

int64_t I64(const nlohmann::json& f, const char* key, int64_t fallback = 0) {
  auto it = f.find(key);
  if (it == f.end()) return fallback;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number_float()) return static_cast<int64_t>(it->get<double>());
  return fallback;
}

std::string Str(const nlohmann::json& f, const char* key) {
  auto it = f.find(key);
  return it != f.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// "0,1,5" -> {0, 1, 5}; stops at the first malformed number.
std::vector<uint32_t> ParseIdList(const std::string& text) {
  std::vector<uint32_t> ids;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    uint32_t id = 0;
    auto [next, ec] = std::from_chars(p, end, id);
    if (ec != std::errc()) break;
    ids.push_back(id);
    p = next;
    if (p < end && *p == ',') ++p;
  }
  return ids;
}

// Upper bounds (seconds) of the run-duration buckets: from a few milliseconds (a small
// program on an idle cluster) to minutes (a training step queued behind other clients).
std::vector<double> RunSecondsBounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
}

}  // namespace

uint64_t ClusterView::Program::shards_expected() const {
  uint64_t total = 0;
  for (const auto& [key, gang] : gang_progress) total += gang.shards_expected;
  return total;
}

ClusterView::ClusterView(ViewOptions options)
    : options_(options), run_seconds_(RunSecondsBounds()) {
  if (options_.busy_window_us <= 0) options_.busy_window_us = 1;
}

ClusterView::Island& ClusterView::IslandNamed(const std::string& name) {
  for (auto& island : islands_) {
    if (island.name == name) return island;
  }
  islands_.push_back(Island{name, "", true, {}});
  return islands_.back();
}

ClusterView::Host& ClusterView::HostNamed(const std::string& name, const std::string& island) {
  Host& host = hosts_[name];
  host.name = name;
  if (!island.empty() && host.island != island) {
    host.island = island;
    auto& list = IslandNamed(island).hosts;
    if (std::find(list.begin(), list.end(), name) == list.end()) list.push_back(name);
  }
  return host;
}

ClusterView::Program& ClusterView::ProgramFor(uint64_t run, uint64_t client) {
  Program& p = programs_[run];
  p.run = run;
  if (client != 0) p.client = client;
  if (p.state.empty()) p.state = "scheduled";
  if (client != 0) clients_[client].id = client;
  return p;
}

std::string ClusterView::ClientLabel(uint64_t client) const {
  auto it = clients_.find(client);
  if (it == clients_.end() || it->second.name.empty()) return "client " + std::to_string(client);
  return it->second.name + " (" + std::to_string(client) + ")";
}

void ClusterView::ApplyStatus(const proto::ClusterStatus& status) {
  for (const auto& island : status.islands) {
    Island& is = IslandNamed(island.name);
    is.scheduler_endpoint = island.scheduler_endpoint;
    is.scheduler_alive = island.scheduler_alive;
    is.scheduler_stall_us = island.scheduler_stall_us;
    for (const auto& hs : island.hosts) {
      Host& host = HostNamed(hs.name, island.name);
      host.store_alive = hs.store_alive;
      host.executor_stall_us = hs.executor_stall_us;
      host.store_stall_us = hs.store_stall_us;
      if (host.alive != hs.alive && !hs.alive) {
        for (uint32_t id : host.devices) devices_[id].busy_pct = 0;
      }
      host.alive = hs.alive;
      for (const auto& ds : hs.devices) {
        Device& d = devices_[ds.device_id];
        d.id = ds.device_id;
        d.host = hs.name;
        d.island = island.name;
        d.kind = ds.kind;
        d.memory_bytes = ds.memory_bytes;
        d.slices = ds.slices;
        if (std::find(host.devices.begin(), host.devices.end(), d.id) == host.devices.end()) {
          host.devices.push_back(d.id);
        }
      }
    }
  }
  rm_clients_ = status.clients;
  rm_stall_us_ = status.rm_stall_us;
  slices_.clear();
  for (const auto& s : status.slices) {
    slices_[s.slice_id] = Slice{s.slice_id, s.client_id, s.island, s.device_ids};
    if (s.client_id != 0) clients_[s.client_id].id = s.client_id;
  }
}

void ClusterView::Apply(const Event& event) {
  const nlohmann::json& f = event.fields;
  if (!f.is_object()) return;
  ++events_seen_;
  now_us_ = std::max(now_us_, I64(f, "ts_us"));
  const std::string& topic = event.topic;
  if (topic == topics::kDeviceRegistered) {
    const auto id = static_cast<uint32_t>(U64(f, "device"));
    const std::string host_name = Str(f, "host");
    Host& host = HostNamed(host_name, Str(f, "island"));
    host.alive = true;
    Device& d = devices_[id];
    d.id = id;
    d.host = host_name;
    d.island = host.island;
    d.kind = Str(f, "kind");
    d.memory_bytes = U64(f, "memory_bytes");
    if (std::find(host.devices.begin(), host.devices.end(), id) == host.devices.end()) {
      host.devices.push_back(id);
    }
  } else if (topic == topics::kDeviceStats) {
    OnDeviceStats(f);
  } else if (topic == topics::kHostLost || topic == topics::kHostBack) {
    auto it = hosts_.find(Str(f, "host"));
    if (it == hosts_.end()) return;
    it->second.alive = topic == topics::kHostBack;
    if (!it->second.alive) {
      for (uint32_t id : it->second.devices) {
        devices_[id].busy_pct = 0;
        devices_[id].queued = 0;
        devices_[id].samples.clear();
      }
    }
  } else if (topic == topics::kIslandScheduler) {
    IslandNamed(Str(f, "island")).scheduler_endpoint = Str(f, "endpoint");
  } else if (topic == topics::kIslandLost || topic == topics::kIslandBack) {
    IslandNamed(Str(f, "island")).scheduler_alive = topic == topics::kIslandBack;
  } else if (topic == topics::kHostStoreLost || topic == topics::kHostStoreBack) {
    if (auto it = hosts_.find(Str(f, "host")); it != hosts_.end()) {
      it->second.store_alive = topic == topics::kHostStoreBack;
    }
  } else if (topic == topics::kStoreStats) {
    const std::string name = Str(f, "host");
    if (name.empty()) return;
    Host& host = hosts_[name];
    host.name = name;
    host.has_store_stats = true;
    host.objects = U64(f, "objects");
    host.bytes_in_use = U64(f, "bytes_in_use");
    host.arena_bytes = U64(f, "arena_bytes");
  } else if (topic == topics::kDataplaneStats) {
    const std::string name = Str(f, "host");
    if (name.empty()) return;
    Host& host = hosts_[name];
    host.name = name;
    host.has_dataplane_stats = true;
    host.tuples_out = U64(f, "tuples_out");
    host.bytes_out = U64(f, "bytes_out");
    host.tuples_in = U64(f, "tuples_in");
    host.bytes_in = U64(f, "bytes_in");
    host.batches_held = U64(f, "batches_held");
  } else if (topic == topics::kSchedulerStats) {
    const std::string name = Str(f, "island");
    if (name.empty()) return;
    Island& island = IslandNamed(name);
    island.has_scheduler_stats = true;
    island.queued_gangs = U64(f, "queued");
    island.gangs_in_flight = U64(f, "in_flight");
    island.dispatches_held = U64(f, "dispatches_held");
  } else if (topic == topics::kNetStats) {
    OnNetStats(f);
  } else if (topic == topics::kSliceCreated) {
    const uint64_t id = U64(f, "slice");
    if (slices_.count(id)) return;
    Slice s{id, U64(f, "client"), Str(f, "island"), ParseIdList(Str(f, "devices"))};
    for (uint32_t d : s.devices) {
      if (auto it = devices_.find(d); it != devices_.end()) it->second.slices++;
    }
    if (s.client != 0) clients_[s.client].id = s.client;
    slices_[id] = std::move(s);
  } else if (topic == topics::kSliceReleased) {
    auto it = slices_.find(U64(f, "slice"));
    if (it == slices_.end()) return;
    for (uint32_t d : it->second.devices) {
      if (auto dev = devices_.find(d); dev != devices_.end() && dev->second.slices > 0) {
        dev->second.slices--;
      }
    }
    slices_.erase(it);
  } else if (topic == topics::kClientConnected) {
    const uint64_t id = U64(f, "client");
    Client& c = clients_[id];
    c.id = id;
    c.name = Str(f, "name");
    c.connected = true;
  } else if (topic == topics::kClientGone) {
    OnClientGone(f);
  } else if (topic == topics::kProgramScheduled) {
    OnProgramScheduled(f);
  } else if (topic == topics::kGangDone) {
    OnGangDone(f);
  } else if (topic == topics::kErrorGang) {
    const uint64_t run = U64(f, "run");
    if (run == 0) return;
    Program& p = ProgramFor(run, 0);
    if (p.error.empty()) p.error = Str(f, "error");
    if (p.error.empty()) p.error = "a shard failed";
    UpdateState(p);
  }
  Trim();
}

void ClusterView::OnDeviceStats(const nlohmann::json& f) {
  const auto id = static_cast<uint32_t>(U64(f, "device"));
  Device& d = devices_[id];
  d.id = id;
  if (d.host.empty()) {
    d.host = Str(f, "host");
    d.island = Str(f, "island");
    Host& host = HostNamed(d.host, d.island);
    if (std::find(host.devices.begin(), host.devices.end(), id) == host.devices.end()) {
      host.devices.push_back(id);
    }
  }
  d.has_stats = true;
  d.queued = U64(f, "queued");
  const int64_t ts = I64(f, "ts_us");
  const auto busy = static_cast<int64_t>(U64(f, "busy_us"));
  // A counter that went back means the executor restarted: start over.
  if (!d.samples.empty() && (busy < d.samples.back().second || ts <= d.samples.back().first)) {
    if (ts <= d.samples.back().first && busy >= d.samples.back().second) return;  // reordered
    d.samples.clear();
  }
  d.busy_us = busy;
  d.samples.emplace_back(ts, busy);
  while (d.samples.size() > 2 && ts - d.samples[1].first >= options_.busy_window_us) {
    d.samples.pop_front();
  }
  if (d.samples.size() >= 2) {
    const auto& [t0, b0] = d.samples.front();
    const double pct = 100.0 * static_cast<double>(busy - b0) / static_cast<double>(ts - t0);
    d.busy_pct = std::clamp(pct, 0.0, 100.0);
  }
}

void ClusterView::OnNetStats(const nlohmann::json& f) {
  const std::string source = Str(f, "src");
  if (source.empty()) return;
  auto& kinds = sent_[source];
  // Fields "<Kind>.msgs" and "<Kind>.bytes" (common/net/sent_counters.h).
  for (const auto& item : f.items()) {
    const std::string& key = item.key();
    const auto dot = key.rfind('.');
    if (dot == std::string::npos || dot == 0) continue;
    const std::string what = key.substr(dot + 1);
    if (what != "msgs" && what != "bytes") continue;
    SentCount& count = kinds[key.substr(0, dot)];
    (what == "msgs" ? count.messages : count.bytes) = U64(f, key.c_str());
  }
}

void ClusterView::OnProgramScheduled(const nlohmann::json& f) {
  const uint64_t run = U64(f, "run");
  if (run == 0) return;
  Program& p = ProgramFor(run, U64(f, "client"));
  const std::string island = Str(f, "island");
  if (std::find(p.islands.begin(), p.islands.end(), island) == p.islands.end()) {
    p.islands.push_back(island);
  }
  p.gangs += U64(f, "gangs");
  const int64_t ts = I64(f, "ts_us");
  if (p.scheduled_us == 0 || (ts != 0 && ts < p.scheduled_us)) p.scheduled_us = ts;
  UpdateState(p);
}

void ClusterView::OnGangDone(const nlohmann::json& f) {
  const uint64_t run = U64(f, "run");
  const uint64_t client = U64(f, "client");
  const auto device = static_cast<uint32_t>(U64(f, "device"));
  Span span;
  span.seq = next_span_seq_++;
  span.run = run;
  span.client = client;
  span.device = device;
  span.node = U64(f, "node");
  span.shard = U64(f, "shard");
  span.gang = U64(f, "gang");
  span.start_us = I64(f, "start_us");
  span.end_us = I64(f, "end_us");
  spans_.push_back(span);

  auto dev = devices_.find(device);
  std::string island;
  if (dev != devices_.end()) {
    dev->second.gangs_done++;
    dev->second.last_client = client;
    island = dev->second.island;
  }
  if (island.empty()) {
    if (auto h = hosts_.find(Str(f, "host")); h != hosts_.end()) island = h->second.island;
  }
  if (run == 0) return;
  Program& p = ProgramFor(run, client);
  Gang& gang = p.gang_progress[{island, span.gang}];
  gang.shards_done++;
  if (gang.shards_expected == 0) {
    // The gang runs one shard on every device of its slice: the client's slice that holds
    // this device tells how many shards to wait for.
    for (const auto& [id, slice] : slices_) {
      if (slice.client == client &&
          std::find(slice.devices.begin(), slice.devices.end(), device) != slice.devices.end()) {
        gang.shards_expected = slice.devices.size();
        break;
      }
    }
  }
  p.shards_done++;
  if (p.first_start_us == 0 || span.start_us < p.first_start_us) p.first_start_us = span.start_us;
  p.last_end_us = std::max(p.last_end_us, span.end_us);
  UpdateState(p);
}

void ClusterView::OnClientGone(const nlohmann::json& f) {
  const uint64_t id = U64(f, "client");
  Client& c = clients_[id];
  c.id = id;
  c.connected = false;
  c.gone_reason = Str(f, "reason");
  // A client that says goodbye has waited for its programs; one that vanished abandons
  // whatever had not finished.
  for (auto& [run, p] : programs_) {
    if (p.client != id || p.finished()) continue;
    p.closed_state = c.gone_reason == "goodbye" ? "done" : "abandoned";
    UpdateState(p);
  }
}

void ClusterView::UpdateState(Program& p) {
  const bool was_finished = p.finished();
  const std::string before = p.state;
  // Done: the schedulers announced the program's gangs, and as many gangs as that have a
  // finished shard on every device of their slice (gang numbers are given at release, so
  // the view cannot know which numbers to wait for, only how many).
  uint64_t complete = 0;
  bool all_complete = true;
  for (const auto& [key, gang] : p.gang_progress) {
    if (gang.shards_expected > 0 && gang.shards_done >= gang.shards_expected) {
      ++complete;
    } else {
      all_complete = false;
    }
  }
  if (!p.error.empty()) {
    p.state = "failed";
  } else if (p.scheduled_us != 0 && p.gangs > 0 && all_complete && complete >= p.gangs) {
    p.state = "done";
  } else if (!p.closed_state.empty()) {
    p.state = p.closed_state;
  } else {
    p.state = p.shards_done > 0 ? "running" : "scheduled";
  }
  if (p.finished() && !p.counted) {
    p.counted = true;
    runs_finished_[p.state]++;
    if (p.state == "done" && p.scheduled_us != 0 && p.last_end_us != 0) {
      // Clocks of different hosts may disagree by a little: never a negative duration.
      run_seconds_.Observe(
          static_cast<double>(std::max<int64_t>(0, p.last_end_us - p.scheduled_us)) / 1e6);
    }
  }
  // Clients count their finished programs for good (the view forgets old programs).
  if (p.client == 0 || p.state == before) return;
  Client& c = clients_[p.client];
  c.id = p.client;
  if (was_finished) (before == "done" ? c.done : c.failed)--;
  if (p.finished()) (p.state == "done" ? c.done : c.failed)++;
}

void ClusterView::Trim() {
  while (spans_.size() > options_.max_spans) spans_.pop_front();
  size_t finished = 0;
  for (const auto& [run, p] : programs_) finished += p.finished() ? 1 : 0;
  while (finished > options_.max_finished_programs) {
    auto oldest = programs_.end();
    for (auto it = programs_.begin(); it != programs_.end(); ++it) {
      if (!it->second.finished()) continue;
      const int64_t t = std::max(it->second.last_end_us, it->second.scheduled_us);
      if (oldest == programs_.end() ||
          t < std::max(oldest->second.last_end_us, oldest->second.scheduled_us)) {
        oldest = it;
      }
    }
    programs_.erase(oldest);
    --finished;
  }
  size_t gone = 0;
  for (const auto& [id, c] : clients_) gone += c.connected ? 0 : 1;
  for (auto it = clients_.begin(); gone > options_.max_gone_clients && it != clients_.end();) {
    if (it->second.connected) {
      ++it;
      continue;
    }
    it = clients_.erase(it);
    --gone;
  }
}

nlohmann::ordered_json ClusterView::ToJson(uint64_t spans_after) const {
  using json = nlohmann::ordered_json;
  json out;
  out["now_us"] = now_us_;
  out["events"] = events_seen_;
  out["islands"] = json::array();
  for (const auto& island : islands_) {
    json ij;
    ij["name"] = island.name;
    ij["scheduler"] = island.scheduler_endpoint;
    ij["scheduler_alive"] = island.scheduler_alive;
    ij["hosts"] = json::array();
    for (const auto& name : island.hosts) {
      const Host& h = hosts_.at(name);
      json hj;
      hj["name"] = h.name;
      hj["alive"] = h.alive;
      hj["store_alive"] = h.store_alive;
      hj["has_store_stats"] = h.has_store_stats;
      hj["objects"] = h.objects;
      hj["bytes_in_use"] = h.bytes_in_use;
      hj["arena_bytes"] = h.arena_bytes;
      hj["devices"] = json::array();
      for (uint32_t id : h.devices) {
        const Device& d = devices_.at(id);
        hj["devices"].push_back({{"id", d.id},
                                 {"kind", d.kind},
                                 {"memory_bytes", d.memory_bytes},
                                 {"slices", d.slices},
                                 {"has_stats", d.has_stats},
                                 {"busy_pct", d.busy_pct},
                                 {"queued", d.queued},
                                 {"gangs_done", d.gangs_done},
                                 {"last_client", d.last_client}});
      }
      ij["hosts"].push_back(std::move(hj));
    }
    out["islands"].push_back(std::move(ij));
  }
  std::map<uint64_t, std::map<std::string, uint64_t>> per_client;
  for (const auto& [run, p] : programs_) per_client[p.client][p.state]++;
  out["clients"] = json::array();
  for (const auto& [id, c] : clients_) {
    const auto& counts = per_client[id];
    auto count = [&](const char* state) {
      auto it = counts.find(state);
      return it == counts.end() ? uint64_t{0} : it->second;
    };
    out["clients"].push_back({{"id", id},
                              {"name", c.name},
                              {"label", ClientLabel(id)},
                              {"connected", c.connected},
                              {"scheduled", count("scheduled")},
                              {"running", count("running")},
                              {"done", c.done},
                              {"failed", c.failed}});
  }
  std::vector<const Program*> programs;
  for (const auto& [run, p] : programs_) programs.push_back(&p);
  std::sort(programs.begin(), programs.end(), [](const Program* a, const Program* b) {
    const int64_t ta = a->scheduled_us != 0 ? a->scheduled_us : a->first_start_us;
    const int64_t tb = b->scheduled_us != 0 ? b->scheduled_us : b->first_start_us;
    return ta != tb ? ta > tb : a->run > b->run;
  });
  out["programs"] = json::array();
  for (const Program* p : programs) {
    out["programs"].push_back({{"run", p->run},
                               {"client", p->client},
                               {"client_label", ClientLabel(p->client)},
                               {"islands", p->islands},
                               {"state", p->state},
                               {"gangs", p->gangs},
                               {"shards_done", p->shards_done},
                               {"shards_expected", p->shards_expected()},
                               {"scheduled_us", p->scheduled_us},
                               {"first_start_us", p->first_start_us},
                               {"last_end_us", p->last_end_us},
                               {"error", p->error}});
  }
  out["spans"] = json::array();
  auto first = std::upper_bound(spans_.begin(), spans_.end(), spans_after,
                                [](uint64_t seq, const Span& s) { return seq < s.seq; });
  for (auto it = first; it != spans_.end(); ++it) {
    out["spans"].push_back({{"seq", it->seq},
                            {"run", it->run},
                            {"client", it->client},
                            {"device", it->device},
                            {"node", it->node},
                            {"shard", it->shard},
                            {"start_us", it->start_us},
                            {"end_us", it->end_us}});
  }
  out["span_seq"] = next_span_seq_ - 1;
  return out;
}

}  // namespace atl
