// What the RM knows of the cluster: hosts and their devices, island schedulers, clients,
// slices with their virtual->physical map, registered functions, and the id counters that
// hand out new ids. Plain data: the RM's Controller owns one and changes it on the RM's loop
// thread only (not thread-safe); the pure functions over it (elastic_core.h, state_file.h)
// take it as an argument. The MSGPACK_DEFINE lists say
// what of each record survives a restart (see state_file.h); the rest is liveness and
// connections, rebuilt as hosts and clients heartbeat again.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/proto/protocol.h"
#include "services/rm/placement.h"

namespace atl::rm {

using Clock = std::chrono::steady_clock;

struct RmState {
  struct Host {
    std::string name;
    std::string island;
    std::string control_endpoint, data_endpoint, store_endpoint;
    std::string routing_id;  // of the executor's DEALER, to send it Compile requests
    // Compiles (with their RM request ids) waiting for the executor to reconnect: after an
    // RM restart its routing id is unknown until its first heartbeat.
    std::vector<std::pair<uint64_t, proto::Compile>> held;
    std::vector<uint32_t> device_ids;
    Clock::time_point last_heard;
    bool alive = true;  // its executor is
    // The host's object store heartbeats on its own: a host may keep its executor and lose
    // its store (or the reverse).
    Clock::time_point store_last_heard;
    bool store_alive = true;
    // From its heartbeats, 0 until heard; kept across RM restarts, so that a store that
    // restarted while the RM was down is still noticed.
    uint64_t store_instance = 0;
    // Drained (DrainHost): about to leave, so placement skips it; cleared when its executor
    // registers again.
    bool drained = false;
    // Their event loops' longest stalls, from their heartbeats; not persisted.
    uint64_t executor_stall_us = 0;
    uint64_t store_stall_us = 0;
    bool operator==(const Host&) const = default;
    MSGPACK_DEFINE(name, island, control_endpoint, data_endpoint, store_endpoint, device_ids,
                   store_instance, drained);
  };
  struct Device {
    uint32_t id = 0;
    std::string host;
    uint32_t local_index = 0;
    proto::DeviceDesc desc;
    uint32_t slices = 0;  // how many slices map a virtual device onto it
    bool operator==(const Device&) const = default;
    MSGPACK_DEFINE(id, host, local_index, desc, slices);
  };
  struct Slice {
    uint64_t id = 0;
    uint64_t client = 0;
    std::string island;
    std::vector<uint32_t> device_ids;  // virtual device i is device_ids[i]
    uint32_t mapping = 0;              // which mapping onto devices: one more per remap
    bool operator==(const Slice&) const = default;
    MSGPACK_DEFINE(id, client, island, device_ids, mapping);
  };
  // A connected client; when it was last heard from is the controller's (ClientLiveness).
  struct Client {
    std::string name;
    // Of the client's request DEALER: where notices go. Clients name their DEALER
    // themselves, so that a restarted RM still reaches them.
    std::string routing_id;
    // The ZAP user id it said HelloClient with ("" on plain text): only that key (or a
    // member) may act for it.
    std::string user_id;
    bool operator==(const Client&) const = default;
    MSGPACK_DEFINE(name, routing_id, user_id);
  };
  struct Function {
    uint64_t client = 0;
    uint64_t slice = 0;
    ir::FunctionDef def;
    bool operator==(const Function&) const = default;
    MSGPACK_DEFINE(client, slice, def);
  };

  // A registered island scheduler's liveness; not persisted: a restarted RM hears again.
  struct SchedulerLiveness {
    Clock::time_point last_heard;
    bool alive = true;
    uint64_t stall_us = 0;  // its event loop's longest stall, from its heartbeats
    bool operator==(const SchedulerLiveness&) const = default;
  };

  std::map<std::string, std::string> scheduler_by_island;  // island -> scheduler endpoint
  std::map<std::string, SchedulerLiveness> schedulers;     // by island, once registered
  std::map<std::string, Host> hosts;                       // by host name
  std::vector<Device> devices;                             // indexed by device id
  std::map<uint64_t, Slice> slices;
  std::map<uint64_t, Client> clients;
  std::map<uint64_t, Function> functions;
  uint64_t next_slice_id = 1;
  uint64_t next_client_id = 1;
  uint64_t next_function_id = 1;

  bool operator==(const RmState&) const = default;
};

// What the placement policy sees of every device, in device id order: a device is alive
// while its host's executor and object store both are and the host is not drained. Every device's
// host must be in `state.hosts`.
std::vector<DeviceLoad> Loads(const RmState& state);

// Every island the RM knows: `configured` (the configuration's islands, a starting list) in
// its order, then, by name, those that joined at run time: a scheduler or an executor
// registered for them. What the state file keeps of hosts and schedulers is all it takes
// for a restarted RM to know them again.
std::vector<std::string> IslandNames(const RmState& state,
                                     const std::vector<std::string>& configured);

}  // namespace atl::rm
