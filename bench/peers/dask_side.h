// The Dask side of bench/peers: dask_side.py in a child process that holds one Dask
// LocalCluster for the whole benchmark and runs one workload per request, asked over its
// stdin and answered over its stdout (one line each way; the protocol is in the script).
//
// Example:
//   ATOLL_ASSIGN_OR_RETURN(auto dask, DaskSide::Start(python, script, log_path));
//   ATOLL_ASSIGN_OR_RETURN(double rate, dask->Measure("chain", 1000, timeout));
//
// Not thread-safe: one thread asks. The script's stderr (Dask's own logging) goes to the log.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "atoll/status.h"

namespace atl::bench {

class DaskSide {
 public:
  // Starts `python script` and waits (at most `startup`) for its cluster to be up.
  // FailedPrecondition when Python lacks the distributed package (requirements.lock's
  // dask[distributed]).
  static Result<std::unique_ptr<DaskSide>> Start(const std::string& python,
                                                 const std::string& script,
                                                 const std::string& log_path,
                                                 std::chrono::milliseconds startup);
  // Closes the script's stdin, which shuts its cluster down; kills it if it has not ended
  // within a few seconds.
  ~DaskSide();
  DaskSide(const DaskSide&) = delete;
  DaskSide& operator=(const DaskSide&) = delete;

  // Dask's version, as the script reported it.
  const std::string& version() const { return version_; }

  // Runs `workload` ("independent", "chain" or "op_by_op") of `tasks` tasks once; returns
  // tasks per second. DeadlineExceeded past `timeout`; Internal with the script's message
  // when it failed.
  Result<double> Measure(const std::string& workload, int tasks, std::chrono::milliseconds timeout);

 private:
  DaskSide(pid_t pid, int requests_fd, int answers_fd, std::string log_path)
      : pid_(pid),
        requests_fd_(requests_fd),
        answers_fd_(answers_fd),
        log_path_(std::move(log_path)) {}

  // The next line the script wrote, parsed; DeadlineExceeded when none came in `timeout`,
  // Unavailable when the script ended (with the end of its log).
  Result<nlohmann::json> ReadAnswer(std::chrono::milliseconds timeout);

  pid_t pid_;
  int requests_fd_;  // the script's stdin
  int answers_fd_;   // the script's stdout
  std::string log_path_;
  std::string buffered_;  // read past the last full line
  std::string version_;
};

}  // namespace atl::bench
