// bench/python: what the Python client adds to the C++ client's cost per run. Two workloads,
// each timed from C++ (this process, the client library) and from Python (client_loop.py,
// the atoll package, one process per repeat), alternating, on one cluster (one host, one cpu
// device, plain text), for a small and a large array of floats:
//   chain       one-call programs f(x) = x + 1, each fed the previous run's output as a
//               future, submitted back to back, then the last result read: us per run
//   round_trip  submit f on an array, read the result: us per round trip
// Derived: Python's time over C++'s (medians), per workload and size.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "atoll/client.h"
#include "bench/common/bench_args.h"
#include "bench/common/bench_cluster.h"
#include "bench/common/bench_result.h"

namespace atl::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(60);

struct Sweep {
  std::vector<int> floats;
  int chain = 0;
  int round_trips = 0;
  int warmup = 10;
  int runs = 0;
};

struct Sample {
  double chain_us_per_run = 0;
  double round_trip_us = 0;
};

double MicrosPer(int count, Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / count;
}

// The C++ side: what client_loop.py does, with the client library.
class CppLoop {
 public:
  static Result<CppLoop> Make(Client& client, int floats) {
    ATOLL_ASSIGN_OR_RETURN(Slice slice, client.CreateSlice(1));
    FunctionBuilder b("inc");
    b.Output(b.Add(b.Input(DType::kF32, {floats}, Sharding::Replicated()), 1.0));
    ATOLL_ASSIGN_OR_RETURN(Function inc, client.Register(b, slice));
    ProgramBuilder p;
    p.Return(p.Call(inc, {p.Arg(DType::kF32, {floats})}));
    ATOLL_ASSIGN_OR_RETURN(Program program, p.Build());
    return CppLoop(client, std::move(program), Tensor(DType::kF32, {floats}));
  }

  Result<Sample> Measure(const Sweep& sweep) {
    for (int i = 0; i < sweep.warmup; ++i) ATOLL_RETURN_IF_ERROR(RoundTrip());
    Sample sample;
    auto start = Clock::now();
    ATOLL_ASSIGN_OR_RETURN(Run run, client_.Submit(program_, {x_}));
    for (int i = 1; i < sweep.chain; ++i) {
      ATOLL_ASSIGN_OR_RETURN(run, client_.Submit(program_, {run.Output(0)}));
    }
    ATOLL_ASSIGN_OR_RETURN(std::vector<Tensor> last, run.Wait(kTimeout));
    sample.chain_us_per_run = MicrosPer(sweep.chain, start);
    if (last[0].as<float>()[0] != static_cast<float>(sweep.chain)) {
      return Internal(fmt::format("the chain computed {}", last[0].as<float>()[0]));
    }
    start = Clock::now();
    for (int i = 0; i < sweep.round_trips; ++i) ATOLL_RETURN_IF_ERROR(RoundTrip());
    sample.round_trip_us = MicrosPer(sweep.round_trips, start);
    return sample;
  }

 private:
  CppLoop(Client& client, Program program, Tensor x)
      : client_(client), program_(std::move(program)), x_(std::move(x)) {}

  Status RoundTrip() {
    ATOLL_ASSIGN_OR_RETURN(Run run, client_.Submit(program_, {x_}));
    return run.Wait(kTimeout).status();
  }

  Client& client_;
  Program program_;
  Tensor x_;
};

// One repeat of client_loop.py, in a process of its own.
Result<Sample> MeasurePython(const std::string& rm, int floats, const Sweep& sweep) {
  const std::string command = fmt::format(
      "PYTHONPATH={} {} {}/bench/python/client_loop.py --rm {} --floats {} --chain {} "
      "--round-trips {} --warmup {}",
      ATOLL_PYTHON_DIR, ATOLL_PYTHON, ATOLL_SOURCE_DIR, rm, floats, sweep.chain, sweep.round_trips,
      sweep.warmup);
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return Internal("cannot run " + command);
  std::string out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
  if (pclose(pipe) != 0) return Internal("failed: " + command);
  const auto json = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("chain_us_per_run") || !json.contains("round_trip_us")) {
    return Internal("unexpected output of client_loop.py: " + out);
  }
  return Sample{json["chain_us_per_run"].get<double>(), json["round_trip_us"].get<double>()};
}

Status RunSweep(const BenchOptions& options, BenchResult& result) {
  const Sweep sweep =
      options.quick ? Sweep{{16, 65536}, 50, 50, 10, 3} : Sweep{{16, 65536}, 300, 300, 20, 7};
  const std::string dir =
      std::filesystem::temp_directory_path() / fmt::format("atoll-bench-python-{}", getpid());
  BenchTopology topology;
  topology.kind = "cpu";
  ATOLL_ASSIGN_OR_RETURN(std::unique_ptr<LocalCluster> cluster,
                         StartBenchCluster(dir, ClusterToml(topology), ATOLL_BIN_DIR));
  const std::string rm = cluster->info().rm_endpoint;
  ATOLL_ASSIGN_OR_RETURN(std::unique_ptr<Client> client,
                         Client::Connect({.rm_endpoint = rm, .name = "bench-cpp"}));
  for (int floats : sweep.floats) {
    ATOLL_ASSIGN_OR_RETURN(CppLoop cpp, CppLoop::Make(*client, floats));
    std::vector<double> chain[2], round_trip[2];  // [0] C++, [1] Python
    for (int r = 0; r < sweep.runs; ++r) {
      ATOLL_ASSIGN_OR_RETURN(Sample c, cpp.Measure(sweep));
      ATOLL_ASSIGN_OR_RETURN(Sample p, MeasurePython(rm, floats, sweep));
      chain[0].push_back(c.chain_us_per_run);
      chain[1].push_back(p.chain_us_per_run);
      round_trip[0].push_back(c.round_trip_us);
      round_trip[1].push_back(p.round_trip_us);
      fmt::print(
          "floats={:>6} run {}: chain {:8.1f} us/run C++, {:8.1f} Python; round trip "
          "{:8.1f} us C++, {:8.1f} Python\n",
          floats, r + 1, c.chain_us_per_run, p.chain_us_per_run, c.round_trip_us, p.round_trip_us);
      std::fflush(stdout);
    }
    const char* series[2] = {"cpp", "python"};
    double medians[2][2];
    for (int s = 0; s < 2; ++s) {
      result.Add(series[s], {{"floats", floats}, {"workload", "chain"}}, "us_per_run", "us",
                 chain[s]);
      result.Add(series[s], {{"floats", floats}, {"workload", "round_trip"}}, "us_per_run", "us",
                 round_trip[s]);
      ATOLL_ASSIGN_OR_RETURN(Summary c, Summarize(chain[s]));
      ATOLL_ASSIGN_OR_RETURN(Summary t, Summarize(round_trip[s]));
      medians[s][0] = c.median;
      medians[s][1] = t.median;
    }
    result.Derive(fmt::format("python_over_cpp_chain_floats_{}", floats),
                  medians[1][0] / medians[0][0]);
    result.Derive(fmt::format("python_over_cpp_round_trip_floats_{}", floats),
                  medians[1][1] / medians[0][1]);
  }
  client.reset();
  ATOLL_RETURN_IF_ERROR(cluster->Stop());
  std::filesystem::remove_all(dir);
  return Status::Ok();
}

}  // namespace
}  // namespace atl::bench

int main(int argc, char** argv) {
  return atl::bench::RunBenchmark(argc, argv, "python",
                                  "the Python client's cost per run against the C++ client's",
                                  atl::bench::RunSweep);
}
