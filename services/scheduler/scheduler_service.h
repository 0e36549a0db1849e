// The island scheduler: gives every gang (all shards of one sharded computation) a place
// in the island's single total order, then sends each executor ONE message holding all of
// its shards' entries of the program, in that order. Executors enqueue shards on their
// device streams in gang order, so no two programs can interleave inconsistently.
//
// Threading: Run() owns every socket; all handlers run on that one loop.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <zmq.hpp>

#include "common/codec.h"
#include "common/config.h"
#include "common/event_loop.h"
#include "common/events.h"
#include "common/transport.h"

namespace atl::scheduler {

class SchedulerService {
 public:
  SchedulerService(zmq::context_t& context, ClusterConfig config, std::string island);

  // Binds the client socket and registers with the RM (retrying until `timeout`).
  Status Start(std::chrono::milliseconds timeout);
  void Run();

  const std::string& endpoint() const { return endpoint_; }

 private:
  void OnRequest();
  Status OnSubmit(proto::Incoming& in);

  zmq::context_t& context_;
  ClusterConfig config_;
  std::string island_;
  zmq::socket_t socket_;
  std::unique_ptr<EventPublisher> events_;
  EventLoop loop_;
  std::string endpoint_;
  net::DealerPool executors_;  // to executors' control endpoints
  uint64_t next_gang_seq_ = 1;
};

}  // namespace atl::scheduler
