// ClusterInfo: what a running local cluster looks like from outside, recorded by the process
// that started it in <state dir>/<record>.toml so that other atoll commands (`status`,
// `watch`, `submit`, `stop`) can find it. One state dir holds a record per `atoll start`
// run on this machine: "cluster" (cluster.toml) for the one that started the RM (`atoll
// start head`, `atoll up`), "host-<name>" for each host that joined (`atoll start host`).
// The file is TOML:
//
//   config = "/abs/path/config/local.toml"
//   keys_dir = "/home/me/.atoll/keys"  # the CURVE keys its services hold; "" for plain text
//   rm_endpoint = "tcp://127.0.0.1:5550"
//   events_in = "tcp://127.0.0.1:5551"
//   events_out = "tcp://127.0.0.1:5552"
//   started_at_us = 1700000000000000
//   [supervisor]                     # `atoll up`'s supervisor (launcher/local_cluster.h)
//   name = "supervisor"
//   program = "/abs/path/bin/atoll"
//   pid = 12340
//   log = "/home/me/.atoll/logs/supervisor.log"
//   [[processes]]
//   name = "rm"                      # "objectstore-i0h0", "executor-i0h0", "scheduler-island0"
//   role = "rm"                      # "rm", "objectstore", "executor" or "scheduler"
//   target = ""                      # the host or island it serves; "" for the RM
//   program = "/abs/path/bin/atoll-rm"
//   pid = 12345
//   log = "/home/me/.atoll/logs/rm.log"
//   restarts = 0                     # how often the supervisor started it again
//   endpoints = { endpoint = "tcp://127.0.0.1:5550", ... }   # its ready file, less pid
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "atoll/status.h"
#include "common/base/state_dir.h"

namespace atl {

struct ProcessInfo {
  std::string name;
  std::string role;
  std::string target;
  std::string program;
  int64_t pid = 0;
  std::string log;
  std::map<std::string, std::string> endpoints;
  int64_t restarts = 0;  // starts after the first, by supervision
};

// The record of the part that started the RM.
inline constexpr const char* kHeadRecord = "cluster";

struct ClusterInfo {
  std::string state_dir;             // where the record lives; not written to the file itself
  std::string record = kHeadRecord;  // its name: <state_dir>/<record>.toml; not written either
  std::string config_path;
  std::string keys_dir;
  std::string rm_endpoint;
  std::string events_in;
  std::string events_out;
  int64_t started_at_us = 0;
  std::vector<ProcessInfo> processes;  // in start order: rm, object stores, executors, schedulers
  ProcessInfo supervisor;              // the process that restarts crashed services; pid 0: none

  // The process called `name`, or nullptr.
  const ProcessInfo* Find(std::string_view name) const;
};

// <state_dir>/<record>.toml
std::string ClusterInfoPath(const std::string& state_dir, const std::string& record = kHeadRecord);

// Writes info.state_dir/info.record.toml atomically (write then rename), so that a reader
// never sees half of it while a supervisor rewrites it after a restart.
Status WriteClusterInfo(const ClusterInfo& info);

// Reads <state_dir>/<record>.toml. NotFound when there is none; InvalidArgument when it
// cannot be parsed.
Result<ClusterInfo> ReadClusterInfo(const std::string& state_dir,
                                    const std::string& record = kHeadRecord);

// Removes <state_dir>/<record>.toml; OK when there is none.
Status RemoveClusterInfo(const std::string& state_dir, const std::string& record = kHeadRecord);

// The records in `state_dir`: the joined hosts' ("host-<name>") by name, then the head's
// ("cluster") when there is one.
std::vector<std::string> ClusterRecords(const std::string& state_dir);

}  // namespace atl
