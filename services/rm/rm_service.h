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

#include "common/codec.h"
#include "common/config.h"
#include "common/event_loop.h"
#include "common/events.h"
#include "services/rm/event_proxy.h"
#include "services/rm/placement.h"

namespace atl::rm {

class RmService {
 public:
  RmService(zmq::context_t& context, ClusterConfig config);

  // Binds the request socket and the event proxy. The bound addresses are then known.
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
    std::vector<uint32_t> device_ids;
    Clock::time_point last_heard;
    bool alive = true;
  };
  struct Device {
    uint32_t id = 0;
    std::string host;
    uint32_t local_index = 0;
    proto::DeviceDesc desc;
    uint32_t slices = 0;
  };
  struct Slice {
    uint64_t id = 0;
    uint64_t client = 0;
    std::string island;
    std::vector<uint32_t> device_ids;
  };
  struct Client {
    std::string name;
    Clock::time_point last_heard;
  };
  struct Function {
    uint64_t client = 0;
    uint64_t slice = 0;
    ir::FunctionDef def;
  };
  // A RegisterFunction waiting for every executor of its slice to compile.
  struct PendingRegistration {
    std::string client_routing_id;
    uint64_t client_request_id = 0;
    uint64_t function_id = 0;
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

  zmq::context_t& context_;
  ClusterConfig config_;
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
  uint64_t next_slice_id_ = 1;
  uint64_t next_client_id_ = 1;
  uint64_t next_function_id_ = 1;
  uint64_t next_request_id_ = 1;
};

}  // namespace atl::rm
