// StartPlan: which services one `atoll start` (or `atoll up`) runs on this machine, under
// one supervisor, recorded in one record of the state dir (cluster_info.h). A plan either
// starts the RM (the head) or joins the RM of a running cluster; either may add island
// schedulers and hosts (an object store and an executor each).
//
//   `atoll up`               WholeCluster(config): the RM, every island's scheduler, every host
//   `atoll start head`       the RM and a scheduler per island it is told of
//   `atoll start host`       joins an RM: one host, and its island's scheduler when it has none
#pragma once

#include <string>
#include <vector>

#include "common/service/config.h"
#include "common/service/host_options.h"

namespace atl {

struct StartPlan {
  // Empty: start the RM here. Otherwise the request endpoint of the RM to join, and its
  // event bus (from its ClusterStatus).
  std::string join_rm;
  std::string events_in;
  std::string events_out;
  std::vector<std::string> schedulers;  // one scheduler for each of these islands
  // An object store and an executor for each; a service is told the island, the device
  // count and kind, and takes the sizes from the config (common/service/host_options.h).
  std::vector<HostPlacement> hosts;
  // Given to every service as --bind and --advertise (common/service/service_main.h);
  // empty: not given.
  std::string bind;
  std::string advertise;
  // The RM's state file (a plan that starts the RM). Empty: <state dir>/rm.state, which a
  // new start removes (a new cluster starts from nothing) and a supervised restart of the
  // RM reads. Set (`atoll start head --rm-state`): that file, which the RM resumes from
  // when it exists, so that a head restarted in place (a container on a volume) carries on
  // with its hosts, clients, slices and functions.
  std::string rm_state_file;

  bool starts_rm() const { return join_rm.empty(); }
  // Its record in the state dir: kHeadRecord for a plan that starts the RM, else
  // "host-<its first host>".
  std::string RecordName() const;
};

// The plan's hosts that run many to an `atoll-simhosts` process: with
// config.sim_hosts_per_process > 0, those of kind "sim" that the config names (the process
// takes their sizes from it), in groups of that many, in the plan's order. Every other
// host runs as an atoll-objectstore and an atoll-executor.
std::vector<std::vector<std::string>> SimHostGroups(const StartPlan& plan,
                                                    const ClusterConfig& config);

// All of `config`: the RM, a scheduler per island and every host, in the config's order.
StartPlan WholeCluster(const ClusterConfig& config);

}  // namespace atl
