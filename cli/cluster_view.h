// ClusterView: the live picture of a cluster that `atoll top` and `atoll dashboard` show,
// kept up to date from the event stream (common/events.h) and from GetClusterStatus, which
// fills in what happened before the viewer subscribed (islands, hosts, devices, slices).
//
// What it derives from which event:
//   device.registered, host.lost/back, island.scheduler   the topology and liveness
//   island.lost/back, host.store_lost/store_back           schedulers' and stores' liveness
//   device.stats {busy_us, queued}                        busy % (the growth of the
//                                                         cumulative busy time over a
//                                                         window, see ViewOptions) and
//                                                         queued gangs per device
//   store.stats {objects, bytes_in_use, arena_bytes}      memory in use per host
//   dataplane.stats {tuples_out, bytes_out, ...}          tuples and bytes per host, and
//                                                         batches held for full peers
//   scheduler.stats {queued, in_flight, dispatches_held}  gangs per island scheduler, and
//                                                         messages held for full executors
//   net.stats {"<Kind>.msgs", "<Kind>.bytes"}             messages sent per service
//   slice.created/released                                slices (shards per gang)
//   client.connected/gone                                 clients and their names
//   program.scheduled, gang.done, error.gang              programs, their state and the
//                                                         timeline of gangs per device;
//                                                         run durations
//
// A program's state: "scheduled" once an island scheduler queued its gangs, "running" once
// a shard of it finished, "done" once as many gangs as the schedulers announced have as
// many finished shards as the slice they ran on has devices (or its client said goodbye),
// "failed" after an error.gang, "abandoned" when its client vanished (liveness) before it
// finished. (No event says that a program finished; this is the view's inference.) A
// program's duration runs from its program.scheduled to the end of its last shard, and is
// counted once, when the view first calls it finished.
//
// Example:
//   ClusterView view;
//   view.ApplyStatus(status);          // optional: the RM's GetClusterStatus reply
//   view.Apply(event);                 // for every event from the bus
//   nlohmann::ordered_json j = view.ToJson(0);  // the dashboard's /api/state
//
// Not thread-safe: one thread applies and reads, or the caller holds a lock.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/histogram.h"
#include "common/net/event_reader.h"
#include "common/proto/protocol.h"

namespace atl {

struct ViewOptions {
  // Busy % of a device is its busy time over the last `busy_window_us` of device.stats
  // reports (wall-clock microseconds). Must be > 0.
  int64_t busy_window_us = 2'000'000;
  // How many finished gang shards the timeline keeps (the oldest go first).
  size_t max_spans = 4000;
  // How many finished programs (done, failed, abandoned) are kept; running ones always are.
  size_t max_finished_programs = 100;
  // How many disconnected clients are kept.
  size_t max_gone_clients = 32;
};

class ClusterView {
 public:
  struct Device {
    uint32_t id = 0;
    std::string host;
    std::string island;
    std::string kind;
    uint64_t memory_bytes = 0;
    uint32_t slices = 0;     // slices mapped onto it
    bool has_stats = false;  // a device.stats report arrived
    uint64_t queued = 0;     // gangs queued on its stream at the last report
    double busy_pct = 0;     // 0..100 over the busy window
    int64_t busy_us = 0;     // the executor's cumulative busy time at the last report
    uint64_t gangs_done = 0;
    uint64_t last_client = 0;                         // owner of the last gang it finished; 0: none
    std::deque<std::pair<int64_t, int64_t>> samples;  // (ts_us, cumulative busy_us)
  };
  struct Host {
    std::string name;
    std::string island;
    bool alive = true;        // its executor
    bool store_alive = true;  // its object store
    std::vector<uint32_t> devices;
    bool has_store_stats = false;
    uint64_t objects = 0;
    uint64_t bytes_in_use = 0;
    uint64_t arena_bytes = 0;
    bool has_dataplane_stats = false;  // its executor's tuples, cumulative
    uint64_t tuples_out = 0;
    uint64_t bytes_out = 0;
    uint64_t tuples_in = 0;
    uint64_t bytes_in = 0;
    uint64_t batches_held = 0;  // now: for peers whose queue is full
    // Its executor's and store's event loops' longest stalls (the RM's status).
    uint64_t executor_stall_us = 0;
    uint64_t store_stall_us = 0;
  };
  struct Island {
    std::string name;
    std::string scheduler_endpoint;
    bool scheduler_alive = true;
    std::vector<std::string> hosts;  // in registration (or status) order
    bool has_scheduler_stats = false;
    uint64_t queued_gangs = 0;  // gangs waiting in its scheduler at the last report
    uint64_t gangs_in_flight = 0;
    uint64_t dispatches_held = 0;     // for executors whose queue is full
    uint64_t scheduler_stall_us = 0;  // its event loop's longest stall (the RM's status)
  };
  struct Slice {
    uint64_t id = 0;
    uint64_t client = 0;
    std::string island;
    std::vector<uint32_t> devices;
  };
  struct Client {
    uint64_t id = 0;
    std::string name;  // empty when it connected before the viewer
    bool connected = true;
    std::string gone_reason;
    uint64_t done = 0;    // its programs that finished "done", forgotten ones included
    uint64_t failed = 0;  // ... "failed" or "abandoned"
  };
  struct Gang {
    uint64_t shards_done = 0;
    uint64_t shards_expected = 0;  // 0: not known yet
  };
  struct Program {
    uint64_t run = 0;
    uint64_t client = 0;
    std::vector<std::string> islands;
    uint64_t gangs = 0;  // how many program.scheduled announced, over all islands
    uint64_t shards_done = 0;
    std::string state;  // see the file comment
    std::string error;
    std::string closed_state;  // "done" or "abandoned" once its client went; "" before
    int64_t scheduled_us = 0;  // 0: not seen
    int64_t first_start_us = 0;
    int64_t last_end_us = 0;
    bool counted = false;  // its first finish is in runs_finished() (and run_seconds())
    // (island, gang sequence number) -> progress, for the gangs that ran a shard so far.
    std::map<std::pair<std::string, uint64_t>, Gang> gang_progress;
    bool finished() const { return state == "done" || state == "failed" || state == "abandoned"; }
    // Shards expected over the gangs whose slice size is known; for a progress figure.
    uint64_t shards_expected() const;
  };
  // Messages a service sent of one kind, cumulative since the service started.
  struct SentCount {
    uint64_t messages = 0;
    uint64_t bytes = 0;
  };
  struct Span {
    uint64_t seq = 0;  // 1, 2, ... in arrival order
    uint64_t run = 0;
    uint64_t client = 0;
    uint32_t device = 0;
    uint64_t node = 0;
    uint64_t shard = 0;
    uint64_t gang = 0;
    int64_t start_us = 0;
    int64_t end_us = 0;
  };

  explicit ClusterView(ViewOptions options = {});

  // Merges the RM's view: adds islands, hosts and devices not seen yet, updates liveness,
  // slice counts and schedulers, and replaces the set of slices. Keeps every live figure.
  void ApplyStatus(const proto::ClusterStatus& status);
  // Applies one event; events of unknown topics and fields of unexpected types are ignored.
  void Apply(const Event& event);

  // Everything, for the dashboard: islands (hosts, devices, memory), clients, programs
  // (newest first), the timeline spans whose seq is greater than `spans_after`, and
  // "span_seq" (the newest span's seq) for the next call. See the implementation for keys.
  nlohmann::ordered_json ToJson(uint64_t spans_after) const;

  const std::vector<Island>& islands() const { return islands_; }
  const std::map<std::string, Host>& hosts() const { return hosts_; }
  const std::map<uint32_t, Device>& devices() const { return devices_; }
  const std::map<uint64_t, Client>& clients() const { return clients_; }
  const std::map<uint64_t, Program>& programs() const { return programs_; }
  const std::deque<Span>& spans() const { return spans_; }
  // By event source ("executor/i0h0", "rm", ...), then message kind ("Dispatch").
  const std::map<std::string, std::map<std::string, SentCount>>& sent() const { return sent_; }
  // Clients connected, as the RM counted them at the last status.
  uint32_t rm_clients() const { return rm_clients_; }
  uint64_t rm_stall_us() const { return rm_stall_us_; }  // its event loop's longest stall
  // Programs by the state they first finished in ("done", "failed", "abandoned").
  const std::map<std::string, uint64_t>& runs_finished() const { return runs_finished_; }
  // The durations (seconds) of the programs that finished "done".
  const Histogram& run_seconds() const { return run_seconds_; }
  // The newest event timestamp seen (wall-clock microseconds); 0 before any.
  int64_t now_us() const { return now_us_; }
  uint64_t events_seen() const { return events_seen_; }
  // "client 3" or the client's name ("submit:figure2 (3)").
  std::string ClientLabel(uint64_t client) const;

 private:
  Island& IslandNamed(const std::string& name);
  Host& HostNamed(const std::string& name, const std::string& island);
  Program& ProgramFor(uint64_t run, uint64_t client);
  void OnDeviceStats(const nlohmann::json& f);
  void OnGangDone(const nlohmann::json& f);
  void OnProgramScheduled(const nlohmann::json& f);
  void OnClientGone(const nlohmann::json& f);
  void OnNetStats(const nlohmann::json& f);
  void UpdateState(Program& program);
  void Trim();

  ViewOptions options_;
  std::vector<Island> islands_;
  std::map<std::string, Host> hosts_;
  std::map<uint32_t, Device> devices_;
  std::map<uint64_t, Slice> slices_;
  std::map<uint64_t, Client> clients_;
  std::map<uint64_t, Program> programs_;  // by run id
  std::deque<Span> spans_;
  std::map<std::string, std::map<std::string, SentCount>> sent_;
  uint32_t rm_clients_ = 0;
  uint64_t rm_stall_us_ = 0;
  std::map<std::string, uint64_t> runs_finished_;
  Histogram run_seconds_;
  uint64_t next_span_seq_ = 1;
  int64_t now_us_ = 0;
  uint64_t events_seen_ = 0;
};

}  // namespace atl
