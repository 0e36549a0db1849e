// bench/peers: atoll against Dask distributed on the same three workloads of tiny tasks
// (f(x) = x + 1 on one number), in tasks per second:
//   independent  N tasks submitted at once, every result gathered
//   chain        a chain of N tasks, each adding 1 to the previous, as one graph
//   op_by_op     the same chain submitted task by task, each given the previous one's future
// atoll: a cluster of 1 host with 2 sim devices; a task is a one-call program on a 1-device
// slice (independent tasks alternate between the two devices' slices; chains stay on one),
// the graph a ProgramBuilder trace of N calls. Dask: a LocalCluster of 2 worker processes
// with 1 thread each (dask_side.py). The two alternate, repeat by repeat, in the same run;
// the first repeat of each warms up. Derived: atoll's median over Dask's, per workload.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>

#include <fmt/format.h>

#include "atoll/client.h"
#include "bench/common/bench_args.h"
#include "bench/common/bench_cluster.h"
#include "bench/common/bench_result.h"
#include "bench/peers/dask_side.h"

namespace atl::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(120);

struct Sweep {
  int tasks = 0;  // per workload
  int runs = 0;   // measured repeats per system, after one warm-up
};

double Rate(int tasks, Clock::time_point start) {
  return tasks / std::chrono::duration<double>(Clock::now() - start).count();
}

// f(x) = x + 1 on an f32[1] on `slice`, as a function and as a one-call program.
struct Inc {
  Function function;
  Program program;

  static Result<Inc> On(Client& client, const Slice& slice) {
    FunctionBuilder b("inc");
    b.Output(b.Add(b.Input(DType::kF32, {1}, Sharding::Replicated()), 1.0));
    ATOLL_ASSIGN_OR_RETURN(Function inc, client.Register(b, slice));
    ProgramBuilder p;
    p.Return(p.Call(inc, {p.Arg(DType::kF32, {1})}));
    ATOLL_ASSIGN_OR_RETURN(Program program, p.Build());
    return Inc{std::move(inc), std::move(program)};
  }
};

Status ExpectValue(const Tensor& t, float expected, const char* workload) {
  if (t.as<float>()[0] == expected) return Status::Ok();
  return Internal(fmt::format("{}: computed {}, not {}", workload, t.as<float>()[0], expected));
}

// The atoll side: one cluster, one client, an `inc` on each of the two devices.
class AtollSide {
 public:
  Status Start(const std::string& dir, int tasks) {
    BenchTopology topology;
    topology.devices_per_host = 2;
    ATOLL_ASSIGN_OR_RETURN(cluster_, StartBenchCluster(dir, ClusterToml(topology), ATOLL_BIN_DIR));
    ATOLL_ASSIGN_OR_RETURN(client_, Client::Connect({.rm_endpoint = cluster_->info().rm_endpoint,
                                                     .name = "bench-peers",
                                                     .keys_dir = cluster_->keys_dir()}));
    for (int device = 0; device < 2; ++device) {
      // The RM maps each slice onto the least-loaded device: one slice per device.
      ATOLL_ASSIGN_OR_RETURN(Slice slice, client_->CreateSlice(1));
      ATOLL_ASSIGN_OR_RETURN(Inc inc, Inc::On(*client_, slice));
      inc_.push_back(std::move(inc));
    }
    ProgramBuilder p;
    Traced x = p.Arg(DType::kF32, {1});
    for (int i = 0; i < tasks; ++i) x = p.Call(inc_[0].function, {x})[0];
    p.Return({x});
    ATOLL_ASSIGN_OR_RETURN(chain_, p.Build());
    return Status::Ok();
  }

  Status Stop() {
    client_.reset();
    return cluster_->Stop();
  }

  Result<double> Independent(int tasks) {
    std::vector<Run> runs;
    runs.reserve(tasks);
    const auto start = Clock::now();
    for (int i = 0; i < tasks; ++i) {
      ATOLL_ASSIGN_OR_RETURN(Run run,
                             client_->Submit(inc_[i % 2].program, {Tensor::F32({1}, {float(i)})}));
      runs.push_back(std::move(run));
    }
    std::vector<float> results;
    results.reserve(tasks);
    for (Run& run : runs) {
      ATOLL_ASSIGN_OR_RETURN(Tensor t, run.Wait(0, kTimeout));
      results.push_back(t.as<float>()[0]);
    }
    const double rate = Rate(tasks, start);
    for (int i = 0; i < tasks; ++i) {
      if (results[i] != float(i + 1)) {
        return Internal(fmt::format("independent: task {} computed {}", i, results[i]));
      }
    }
    return rate;
  }

  Result<double> Chain(int tasks) {
    const auto start = Clock::now();
    ATOLL_ASSIGN_OR_RETURN(Run run, client_->Submit(chain_, {Tensor::F32({1}, {0})}));
    ATOLL_ASSIGN_OR_RETURN(Tensor last, run.Wait(0, kTimeout));
    const double rate = Rate(tasks, start);
    ATOLL_RETURN_IF_ERROR(ExpectValue(last, float(tasks), "chain"));
    return rate;
  }

  Result<double> OpByOp(int tasks) {
    const auto start = Clock::now();
    ATOLL_ASSIGN_OR_RETURN(Run run, client_->Submit(inc_[0].program, {Tensor::F32({1}, {0})}));
    for (int i = 1; i < tasks; ++i) {
      ATOLL_ASSIGN_OR_RETURN(run, client_->Submit(inc_[0].program, {run.Output(0)}));
    }
    ATOLL_ASSIGN_OR_RETURN(Tensor last, run.Wait(0, kTimeout));
    const double rate = Rate(tasks, start);
    ATOLL_RETURN_IF_ERROR(ExpectValue(last, float(tasks), "op_by_op"));
    return rate;
  }

 private:
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<Client> client_;
  std::vector<Inc> inc_;  // one per device
  Program chain_;
};

Status RunSweep(const BenchOptions& options, BenchResult& result) {
  const Sweep sweep = options.quick ? Sweep{200, 3} : Sweep{1000, 7};
  const std::string dir =
      std::filesystem::temp_directory_path() / fmt::format("atoll-bench-peers-{}", getpid());
  std::filesystem::create_directories(dir);
  ATOLL_ASSIGN_OR_RETURN(std::unique_ptr<DaskSide> dask,
                         DaskSide::Start(ATOLL_PYTHON, ATOLL_SOURCE_DIR "/bench/peers/dask_side.py",
                                         dir + "/dask.log", std::chrono::seconds(60)));
  fmt::print("dask {} (LocalCluster: 2 worker processes x 1 thread)\n", dask->version());
  AtollSide atoll;
  ATOLL_RETURN_IF_ERROR(atoll.Start(dir + "/atoll", sweep.tasks).WithContext("atoll cluster"));
  const std::vector<std::pair<std::string, std::function<Result<double>(int)>>> workloads = {
      {"independent", [&](int n) { return atoll.Independent(n); }},
      {"chain", [&](int n) { return atoll.Chain(n); }},
      {"op_by_op", [&](int n) { return atoll.OpByOp(n); }},
  };
  for (const auto& [workload, measure_atoll] : workloads) {
    std::vector<double> atoll_rates, dask_rates;
    for (int r = 0; r <= sweep.runs; ++r) {  // run 0 warms up (connections, compiles)
      ATOLL_ASSIGN_OR_RETURN(double a, measure_atoll(sweep.tasks));
      ATOLL_ASSIGN_OR_RETURN(double d, dask->Measure(workload, sweep.tasks, kTimeout));
      fmt::print("{:>12} run {}: atoll {:>9.0f} tasks/s, dask {:>9.0f} tasks/s\n", workload, r, a,
                 d);
      std::fflush(stdout);
      if (r == 0) continue;
      atoll_rates.push_back(a);
      dask_rates.push_back(d);
    }
    ATOLL_ASSIGN_OR_RETURN(Summary atoll_summary, Summarize(atoll_rates));
    ATOLL_ASSIGN_OR_RETURN(Summary dask_summary, Summarize(dask_rates));
    result.Derive("atoll_over_dask_" + workload, atoll_summary.median / dask_summary.median);
    const Params params = {{"workload", workload}, {"tasks", sweep.tasks}};
    result.Add("atoll", params, "tasks_per_s", "1/s", atoll_rates);
    result.Add("dask", params, "tasks_per_s", "1/s", dask_rates);
  }
  Status stopped = atoll.Stop();
  dask.reset();
  std::filesystem::remove_all(dir);
  return stopped;
}

}  // namespace
}  // namespace atl::bench

int main(int argc, char** argv) {
  return atl::bench::RunBenchmark(argc, argv, "peers",
                                  "tasks per second, atoll against Dask distributed",
                                  atl::bench::RunSweep);
}
