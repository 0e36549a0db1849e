// SimHosts: many simulated hosts in one process (atoll-simhosts), so that a cluster of
// hundreds of hosts fits on one machine. Each host is what two processes would be: an
// ExecutorService and a StoreService, with their own sockets, arena and event loops, each
// loop on a thread of its own (plus the executor's device threads); only the ZeroMQ
// context (its I/O threads) and the process are shared. Hosts must be of kind "sim", whose
// devices sleep instead of computing, so that N hosts on a few cores measure the runtime
// and not the cores.
//
// Threading: Start() and the destructor run on one thread (main's); every host's loops run
// on their own threads until a shutdown signal or Stop().
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "atoll/status.h"
#include "common/net/zap_handler.h"
#include "common/service/config.h"
#include "common/service/host_options.h"
#include "services/executor/executor_service.h"
#include "services/objectstore/store_service.h"

namespace atl::simhosts {

class SimHosts {
 public:
  // Starts every host of `hosts` in turn (store, then executor, which registers with
  // config.rm_endpoint within `timeout`) and returns once all are registered. Fails,
  // having stopped those it started, with InvalidArgument for a host that is not of kind
  // "sim" or is named twice, FailedPrecondition when the process limits cannot hold them
  // (process_limits.h), or the first host's error that failed to start.
  static Result<std::unique_ptr<SimHosts>> Start(ClusterConfig config,
                                                 const std::vector<HostPlacement>& hosts,
                                                 std::chrono::milliseconds timeout);
  // Stops every host and joins its threads; the stores unlink their arenas.
  ~SimHosts();
  SimHosts(const SimHosts&) = delete;
  SimHosts& operator=(const SimHosts&) = delete;

  // Waits until every host's loops have returned (a shutdown signal, or Stop()).
  void Wait();
  // Makes every host's loops return; from any thread.
  void Stop();

  // For the ready file: "hosts" (how many) and "arena_<host>" (each store's arena, which
  // the launcher unlinks if this process dies without doing so).
  std::map<std::string, std::string> ReadyValues() const;

 private:
  struct Host {
    std::string name;
    std::unique_ptr<store::StoreService> store;
    std::unique_ptr<executor::ExecutorService> executor;
    std::thread store_loop;
    std::thread executor_loop;
  };

  explicit SimHosts(int io_threads, int max_sockets);
  Status StartHost(const ClusterConfig& config, const HostPlacement& where,
                   std::chrono::milliseconds timeout);

  zmq::context_t context_;
  std::unique_ptr<net::ZapHandler> zap_;  // null in plain text
  std::vector<Host> hosts_;
};

}  // namespace atl::simhosts
