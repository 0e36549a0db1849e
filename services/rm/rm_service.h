// The resource manager: the cluster's single controller for resources. It owns the
// islands, hosts and devices, the virtual slices and their mapping onto devices, the
// registry of compiled functions, and client and executor liveness.
//
// Threading: Run() owns the ROUTER socket and all state; every handler runs on that one
// loop. The event proxy runs on its own thread.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "common/net/event_loop.h"
#include "common/net/events.h"
#include "common/net/transport.h"
#include "common/proto/codec.h"
#include "common/service/config.h"
#include "services/rm/event_proxy.h"
#include "services/rm/placement.h"

namespace atl::rm {

// How long executors get to compile a function before its registration (or a remap) fails.
inline constexpr auto kCompileTimeout = std::chrono::seconds(10);

inline std::string RoutingId(const proto::Incoming& in) {
  return in.routing_id ? in.routing_id->to_string() : std::string();
}

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

  const std::string& endpoint() const { return endpoint_; }
  const std::string& events_in() const { return proxy_.in_endpoint(); }
  const std::string& events_out() const { return proxy_.out_endpoint(); }

 private:
  using Clock = std::chrono::steady_clock;

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
    bool alive = true;
    MSGPACK_DEFINE(name, island, control_endpoint, data_endpoint, store_endpoint, device_ids);
  };
  struct Device {
    uint32_t id = 0;
    std::string host;
    uint32_t local_index = 0;
    proto::DeviceDesc desc;
    uint32_t slices = 0;
    MSGPACK_DEFINE(id, host, local_index, desc, slices);
  };
  struct Slice {
    uint64_t id = 0;
    uint64_t client = 0;
    std::string island;
    std::vector<uint32_t> device_ids;
    MSGPACK_DEFINE(id, client, island, device_ids);
  };
  struct Client {
    std::string name;
    Clock::time_point last_heard;
    std::string routing_id;  // of the client's request DEALER: where notices go
    MSGPACK_DEFINE(name);
  };
  struct Function {
    uint64_t client = 0;
    uint64_t slice = 0;
    ir::FunctionDef def;
    MSGPACK_DEFINE(client, slice, def);
  };
  // A RegisterFunction waiting for every executor of its slice to compile.
  struct PendingRegistration {
    std::string client_routing_id;
    uint64_t client_request_id = 0;
    uint64_t function_id = 0;
    size_t acks_missing = 0;
    Clock::time_point deadline;
  };
  // A slice remapped off a lost host, waiting for its functions to compile on the new
  // mapping before its client is told.
  struct PendingRemap {
    uint64_t slice = 0;
    std::string reason;
    size_t acks_missing = 0;
    Clock::time_point deadline;
  };

  void OnRequest();
  Status Handle(proto::Incoming& in);
  Status OnRegisterExecutor(proto::Incoming& in);
  Status OnHeartbeat(proto::Incoming& in);
  Status OnRegisterScheduler(proto::Incoming& in);
  Status OnHelloClient(proto::Incoming& in);
  Status OnGoodbye(proto::Incoming& in);
  Status OnCreateSlice(proto::Incoming& in);
  Status OnRegisterFunction(proto::Incoming& in);
  Status OnCompileReply(proto::Incoming& in);
  Status OnClusterStatus(proto::Incoming& in);
  void CheckLiveness();

  // Frees a client's slices (and so the load they put on devices).
  void DropClient(uint64_t client_id, const std::string& why);
  void FinishRegistration(uint64_t rm_request_id, const Status& status);
  proto::SliceInfo DescribeSlice(const Slice& slice) const;
  std::vector<DeviceLoad> Loads() const;
  // Learns where the host's executor is connected now and sends it what was held.
  void Reconnected(Host& host, const proto::Incoming& in);
  // Sends Compile of `function_id` to every host of `slice` under `rm_request`; returns how
  // many hosts will answer.
  Result<size_t> SendCompile(uint64_t rm_request, uint64_t function_id, const Slice& slice,
                             const ir::FunctionDef& def);

  // Elasticity (elastic.cc). A lost host: executors stop waiting for its tuples, its store
  // fails what its executor never wrote, and every slice on it is remapped.
  void OnHostLost(Host& host, const std::string& reason);
  void OnHostBack(Host& host);
  void BroadcastHostChanged(const Host& host, bool lost, const std::string& reason);
  void RemapSlicesOff(const Host& host, const std::string& reason);
  // The slice's functions compiled on its new mapping (or not): its client is told.
  void FinishRemap(uint64_t rm_request_id, const Status& status);

  // Persistence (state_file.cc): what must survive a restart (hosts, devices, schedulers,
  // clients, slices and the virtual->physical map, functions, id counters), as msgpack.
  // Save() after every change of it; a failed write is logged and published, not fatal.
  Status LoadState();
  void SaveState();

  zmq::context_t& context_;
  ClusterConfig config_;
  std::string state_file_;
  zmq::socket_t socket_;
  EventProxy proxy_;
  std::unique_ptr<EventPublisher> events_;
  std::unique_ptr<PlacementPolicy> placement_;
  EventLoop loop_;
  std::string endpoint_;

  std::map<std::string, std::string> scheduler_by_island_;
  std::map<std::string, Host> hosts_;
  std::vector<Device> devices_;  // indexed by device id
  std::map<uint64_t, Slice> slices_;
  std::map<uint64_t, Client> clients_;
  std::map<uint64_t, Function> functions_;
  std::map<uint64_t, PendingRegistration> pending_;  // by the RM's own request id
  std::map<uint64_t, PendingRemap> remaps_;          // by the RM's own request id
  net::DealerPool stores_;                           // to object stores, for HostChanged
  uint64_t next_slice_id_ = 1;
  uint64_t next_client_id_ = 1;
  uint64_t next_function_id_ = 1;
  uint64_t next_request_id_ = 1;
};

}  // namespace atl::rm
