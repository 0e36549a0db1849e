// bench/client: what a program costs from the client's side, on a local cluster of one host
// with two cpu devices (plain text), against raw ZeroMQ measured in the same run:
//   zmq_round_trip   a 64-byte message to another process and back, DEALER to DEALER
//                    (atoll-bench-zmq-echo): the floor of any request
//   round_trip       submit f(x) = x + 1 on a fresh tensor x of `floats` floats, read the
//                    result: us per synchronous round trip
//   fresh_programs   one client submits `programs` independent one-call programs, each on a
//                    fresh tensor, back to back, then waits for every result: programs/s
//   round_trip_hops  where a round trip's microseconds go, hop by hop (hop_trace.h): the
//                    median over `round_trips` round trips of 16 floats, per run
//   chain_hops       the same for one computation of a chain of `chain` calls in one
//                    program on one device (128: bench/dispatch's chain)
//   chain_run_hops   where that whole run's microseconds go (hop_trace.h)
//   op_by_op_hops    the same per call of `chain` one-call programs on one device, each on
//                    the one before's future (hop_trace.h)
//   op_by_op_stream  `stream` one-call programs streamed back to back over both devices,
//                    x = all_reduce_mean(x) + 1, each on the previous one's future, the
//                    last waited for: calls/s sustained past every queue's high-water mark
//                    (such a stream hung about one run in two while requests in flight to
//                    a ROUTER were not bounded; docs/design-notes.md)
//   clients_connected new clients per second, `clients` at once, each connecting, creating a
//                    slice, registering a function and running it once, on a CURVE and a
//                    plain-text cluster of `atoll up`'s shape (connect_rate.h)
// Derived: the round trip over raw ZeroMQ's, per size.
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "atoll/client.h"
#include "bench/client/connect_rate.h"
#include "bench/client/hop_trace.h"
#include "bench/common/bench_args.h"
#include "bench/common/bench_cluster.h"
#include "bench/common/bench_result.h"
#include "common/net/events.h"
#include "common/net/transport.h"
#include "launcher/process.h"

namespace atl::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(30);

struct Sweep {
  std::vector<int> floats;
  int round_trips = 0;  // per sample
  int programs = 0;     // per sample
  int chain = 0;        // calls in the chained program of chain_hops
  int stream = 0;       // calls in an op_by_op_stream sample
  int stream_runs = 0;  // op_by_op_stream samples (each a stream: seconds, not microseconds)
  int runs = 0;
  int warmup = 50;
};

double MicrosPer(int count, Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / count;
}

// The raw ZeroMQ round trip: a DEALER bound here, atoll-bench-zmq-echo's connected to it.
class ZmqEcho {
 public:
  ZmqEcho() : socket_(net::MakeSocket(context_, zmq::socket_type::dealer)) {}

  Status Start(const std::string& log_path) {
    ATOLL_ASSIGN_OR_RETURN(std::string endpoint, net::Bind(socket_, "tcp://127.0.0.1:*"));
    ATOLL_ASSIGN_OR_RETURN(
        pid_, proc::Spawn({{ATOLL_BIN_DIR "/atoll-bench-zmq-echo", endpoint}, log_path}));
    ATOLL_ASSIGN_OR_RETURN(auto hello, net::RecvFrames(socket_, kTimeout));
    if (!hello) return DeadlineExceeded("atoll-bench-zmq-echo did not greet; see " + log_path);
    return Status::Ok();
  }

  ~ZmqEcho() {
    net::Frames bye;
    bye.emplace_back(std::string_view("bye"));
    if (pid_ <= 0 || !net::SendFrames(socket_, bye).ok()) return;
    for (int i = 0; i < 100; ++i) {  // bounded: it exits as soon as it reads the goodbye
      auto ended = proc::TryReap(pid_);
      if (!ended.ok() || ended->has_value()) return;
      pollfd none{-1, 0, 0};
      poll(&none, 0, 10);
    }
  }

  // Microseconds per round trip, over `count` of them.
  Result<double> Measure(int count) {
    const std::string payload(64, 'x');
    const auto start = Clock::now();
    for (int i = 0; i < count; ++i) {
      net::Frames message;
      message.emplace_back(payload.data(), payload.size());
      ATOLL_RETURN_IF_ERROR(net::SendFrames(socket_, message));
      ATOLL_ASSIGN_OR_RETURN(auto echoed, net::RecvFrames(socket_, kTimeout));
      if (!echoed) return DeadlineExceeded("atoll-bench-zmq-echo did not answer");
    }
    return MicrosPer(count, start);
  }

 private:
  zmq::context_t context_;
  zmq::socket_t socket_;
  pid_t pid_ = -1;
};

// One op_by_op_stream sample: calls/s over `calls` streamed calls on `both` devices.
Result<double> StreamedCalls(Client& client, const Slice& both, int calls) {
  FunctionBuilder b("mean_inc");
  b.Output(b.Add(b.AllReduceMean(b.Input(DType::kF32, {16}, Sharding::Replicated())), 1.0));
  ATOLL_ASSIGN_OR_RETURN(Function step, client.Register(b, both));
  ProgramBuilder p;
  p.Return(p.Call(step, {p.Arg(DType::kF32, {16})}));
  ATOLL_ASSIGN_OR_RETURN(Program one, p.Build());
  const auto start = Clock::now();
  ATOLL_ASSIGN_OR_RETURN(Run run, client.Submit(one, {Tensor::F32({16}, std::vector<float>(16))}));
  for (int i = 1; i < calls; ++i) {
    ATOLL_ASSIGN_OR_RETURN(Run next, client.Submit(one, {run.Output(0)}));
    run = std::move(next);
  }
  ATOLL_ASSIGN_OR_RETURN(std::vector<Tensor> out, run.Wait(std::chrono::minutes(2)));
  const double rate = calls / std::chrono::duration<double>(Clock::now() - start).count();
  // Each call adds 1 (exact in f32 below 2^24): a lost or repeated call shows.
  if (out[0] != Tensor::F32({16}, std::vector<float>(16, static_cast<float>(calls)))) {
    return Internal(fmt::format("a stream of {} calls ended at {}", calls, out[0].ToString()));
  }
  return rate;
}

// f(x) = x + 1 on one device, for tensors of `floats` floats.
class Workload {
 public:
  static Result<Workload> Make(Client& client, const Slice& slice, int floats) {
    FunctionBuilder b("inc");
    b.Output(b.Add(b.Input(DType::kF32, {floats}, Sharding::Replicated()), 1.0));
    ATOLL_ASSIGN_OR_RETURN(Function inc, client.Register(b, slice));
    ProgramBuilder p;
    p.Return(p.Call(inc, {p.Arg(DType::kF32, {floats})}));
    ATOLL_ASSIGN_OR_RETURN(Program program, p.Build());
    return Workload(client, std::move(inc), std::move(program), floats);
  }

  // The hops of `count` round trips, each traced; the median per hop.
  Result<Hops> TracedRoundTrips(HopTrace& trace, int count) {
    struct Timed {
      uint64_t run;
      int64_t submit_us, sent_us, done_us;
    };
    std::vector<Timed> timed;
    for (int i = 0; i < count; ++i) {
      Tensor x = Fresh(i);
      const int64_t submit_us = NowMicros();
      ATOLL_ASSIGN_OR_RETURN(Run run, client_.Submit(program_, {x}));
      const int64_t sent_us = NowMicros();
      ATOLL_ASSIGN_OR_RETURN(std::vector<Tensor> out, run.Wait(kTimeout));
      timed.push_back({run.id(), submit_us, sent_us, NowMicros()});
      ATOLL_RETURN_IF_ERROR(Check(out[0], i));
    }
    ATOLL_RETURN_IF_ERROR(trace.Collect(std::chrono::milliseconds(300)));
    std::map<std::string, std::vector<double>> per_hop;
    for (const Timed& t : timed) {
      ATOLL_ASSIGN_OR_RETURN(Hops hops, trace.RoundTrip(t.run, t.submit_us, t.sent_us, t.done_us));
      for (const auto& [hop, us] : hops) per_hop[hop].push_back(us);
    }
    trace.Clear();
    Hops medians;
    for (const auto& [hop, us] : per_hop) medians[hop] = Median(us);
    return medians;
  }

  // The hops of a program of `calls` chained calls, traced: per computation, and the run's.
  struct ChainTrace {
    Hops step, run;
  };
  Result<ChainTrace> TracedChain(HopTrace& trace, int calls) {
    ProgramBuilder p;
    Traced t = p.Arg(DType::kF32, {floats_});
    for (int i = 0; i < calls; ++i) t = p.Call(inc_, {t})[0];
    p.Return({t});
    ATOLL_ASSIGN_OR_RETURN(Program chain, p.Build());
    const int64_t submit_us = NowMicros();
    ATOLL_ASSIGN_OR_RETURN(Run run, client_.Submit(chain, {Fresh(0)}));
    const int64_t sent_us = NowMicros();
    ATOLL_ASSIGN_OR_RETURN(std::vector<Tensor> out, run.Wait(kTimeout));
    const int64_t done_us = NowMicros();
    ATOLL_RETURN_IF_ERROR(Check(out[0], calls - 1));
    ATOLL_RETURN_IF_ERROR(trace.Collect(std::chrono::milliseconds(300)));
    ChainTrace traced;
    ATOLL_ASSIGN_OR_RETURN(traced.step, trace.Chain(run.id()));
    ATOLL_ASSIGN_OR_RETURN(traced.run, trace.ChainRun(run.id(), submit_us, sent_us, done_us));
    trace.Clear();
    return traced;
  }

  // The hops per call of a stream of `calls` one-call programs, each on the previous one's
  // future, traced.
  Result<Hops> TracedOpByOp(HopTrace& trace, int calls) {
    std::vector<uint64_t> runs;
    std::vector<int64_t> sent_us;
    ATOLL_ASSIGN_OR_RETURN(Run run, client_.Submit(program_, {Fresh(0)}));
    for (int i = 0; i < calls; ++i) {
      ATOLL_ASSIGN_OR_RETURN(Run next, client_.Submit(program_, {run.Output(0)}));
      sent_us.push_back(NowMicros());
      runs.push_back(next.id());
      run = std::move(next);
    }
    ATOLL_ASSIGN_OR_RETURN(std::vector<Tensor> out, run.Wait(kTimeout));
    ATOLL_RETURN_IF_ERROR(Check(out[0], calls));
    ATOLL_RETURN_IF_ERROR(trace.Collect(std::chrono::milliseconds(300)));
    auto hops = trace.OpByOp(runs, sent_us);
    trace.Clear();
    return hops;
  }

  // Microseconds per synchronous round trip, over `count` of them; each checks its value.
  Result<double> RoundTrips(int count) {
    const auto start = Clock::now();
    for (int i = 0; i < count; ++i) {
      Tensor x = Fresh(i);
      ATOLL_ASSIGN_OR_RETURN(Run run, client_.Submit(program_, {x}));
      ATOLL_ASSIGN_OR_RETURN(std::vector<Tensor> out, run.Wait(kTimeout));
      ATOLL_RETURN_IF_ERROR(Check(out[0], i));
    }
    return MicrosPer(count, start);
  }

  // Programs per second: `count` submitted back to back, then every result read.
  Result<double> FreshPrograms(int count) {
    std::vector<Run> runs;
    runs.reserve(count);
    const auto start = Clock::now();
    for (int i = 0; i < count; ++i) {
      ATOLL_ASSIGN_OR_RETURN(Run run, client_.Submit(program_, {Fresh(i)}));
      runs.push_back(std::move(run));
    }
    for (int i = 0; i < count; ++i) {
      ATOLL_ASSIGN_OR_RETURN(std::vector<Tensor> out, runs[i].Wait(kTimeout));
      ATOLL_RETURN_IF_ERROR(Check(out[0], i));
    }
    return count / std::chrono::duration<double>(Clock::now() - start).count();
  }

 private:
  Workload(Client& client, Function inc, Program program, int floats)
      : client_(client), inc_(std::move(inc)), program_(std::move(program)), floats_(floats) {}

  // A new tensor each time, as a caller's fresh data: x[j] = i.
  Tensor Fresh(int i) const {
    return Tensor::F32({floats_}, std::vector<float>(floats_, static_cast<float>(i)));
  }

  Status Check(const Tensor& out, int i) const {
    const float want = static_cast<float>(i) + 1;
    if (out.shape() != Shape{floats_} || out.as<float>()[floats_ - 1] != want) {
      return Internal(fmt::format("program {} computed {}, not {}", i, out.as<float>()[0], want));
    }
    return Status::Ok();
  }

  Client& client_;
  Function inc_;
  Program program_;
  int floats_;
};

// Both hop breakdowns, traced apart from the timed runs above (tracing costs the client a
// clock read or two per run; the services publish these events anyway).
Status MeasureHops(const Sweep& sweep, Client& client, const Slice& slice,
                   const std::string& events_out, BenchResult& result) {
  ATOLL_ASSIGN_OR_RETURN(Workload workload, Workload::Make(client, slice, sweep.floats.front()));
  zmq::context_t context;
  HopTrace trace(context, events_out);
  ATOLL_RETURN_IF_ERROR(trace.Start([&] { return workload.RoundTrips(1).status(); }));
  std::map<std::string, std::vector<double>> round_trip, chain, chain_run, op_by_op;
  for (int r = 0; r < sweep.runs; ++r) {
    ATOLL_ASSIGN_OR_RETURN(Hops hops, workload.TracedRoundTrips(trace, sweep.round_trips));
    for (const auto& [hop, us] : hops) round_trip[hop].push_back(us);
    ATOLL_ASSIGN_OR_RETURN(auto traced, workload.TracedChain(trace, sweep.chain));
    for (const auto& [hop, us] : traced.step) chain[hop].push_back(us);
    for (const auto& [hop, us] : traced.run) chain_run[hop].push_back(us);
    ATOLL_ASSIGN_OR_RETURN(Hops calls, workload.TracedOpByOp(trace, sweep.chain));
    for (const auto& [hop, us] : calls) op_by_op[hop].push_back(us);
  }
  auto add = [&](const char* series, const std::vector<std::string>& order, auto& samples) {
    fmt::print("{}:", series);
    for (const std::string& hop : order) {
      fmt::print(" {} {:.1f}", hop, Median(samples[hop]));
      result.Add(series, {{"hop", hop}}, "us", "us", samples[hop]);
    }
    fmt::print(" (us)\n");
  };
  add("round_trip_hops", RoundTripHops(), round_trip);
  add("chain_hops", ChainHops(), chain);
  add("chain_run_hops", ChainRunHops(), chain_run);
  add("op_by_op_hops", OpByOpHops(), op_by_op);
  return Status::Ok();
}

// --connect-only: clients_connected alone (to profile connecting, or to rerun it quickly).
bool connect_only = false;

Status RunSweep(const BenchOptions& options, BenchResult& result) {
  const Sweep sweep = options.quick ? Sweep{{16}, 200, 500, 128, 10000, 1, 3}
                                    : Sweep{{16, 4096}, 1000, 5000, 128, 100000, 3, 7};
  const std::string dir =
      std::filesystem::temp_directory_path() / fmt::format("atoll-bench-client-{}", getpid());
  const ConnectSweep connect =
      options.quick ? ConnectSweep{{64}, 3} : ConnectSweep{{16, 64, 256}, 5};
  if (connect_only) {
    Status measured = MeasureConnectRate(connect, dir, result);
    std::filesystem::remove_all(dir);
    return measured;
  }
  BenchTopology topology;
  topology.devices_per_host = 2;
  topology.kind = "cpu";
  ATOLL_ASSIGN_OR_RETURN(auto cluster,
                         StartBenchCluster(dir + "/cluster", ClusterToml(topology), ATOLL_BIN_DIR));
  ATOLL_ASSIGN_OR_RETURN(auto client, Client::Connect({.rm_endpoint = cluster->info().rm_endpoint,
                                                       .name = "bench-client",
                                                       .keys_dir = cluster->keys_dir()}));
  ATOLL_ASSIGN_OR_RETURN(Slice slice, client->CreateSlice(1));
  ZmqEcho echo;
  ATOLL_RETURN_IF_ERROR(echo.Start(dir + "/zmq-echo.log"));
  ATOLL_RETURN_IF_ERROR(echo.Measure(sweep.warmup).status());

  std::vector<double> zmq_us;
  for (int floats : sweep.floats) {
    ATOLL_ASSIGN_OR_RETURN(Workload workload, Workload::Make(*client, slice, floats));
    ATOLL_RETURN_IF_ERROR(workload.RoundTrips(sweep.warmup).status());
    std::vector<double> round_trip_us, programs_per_s;
    // Raw ZeroMQ and atoll take turns, so that both see the same machine.
    for (int r = 0; r < sweep.runs; ++r) {
      ATOLL_ASSIGN_OR_RETURN(double zmq, echo.Measure(sweep.round_trips));
      zmq_us.push_back(zmq);
      ATOLL_ASSIGN_OR_RETURN(double us, workload.RoundTrips(sweep.round_trips));
      round_trip_us.push_back(us);
      ATOLL_ASSIGN_OR_RETURN(double rate, workload.FreshPrograms(sweep.programs));
      programs_per_s.push_back(rate);
    }
    fmt::print("floats={:>5}: round trip {:>6.1f} us, fresh programs {:>7.0f}/s\n", floats,
               Median(round_trip_us), Median(programs_per_s));
    result.Add("round_trip", {{"floats", floats}}, "us_per_round_trip", "us", round_trip_us);
    result.Add("fresh_programs", {{"floats", floats}}, "programs_per_s", "1/s", programs_per_s);
    result.Derive(fmt::format("round_trip_over_zmq_round_trip_floats_{}", floats),
                  Median(round_trip_us) / Median(zmq_us));
  }
  fmt::print("raw ZeroMQ round trip {:.1f} us\n", Median(zmq_us));
  ATOLL_RETURN_IF_ERROR(MeasureHops(sweep, *client, slice, cluster->info().events_out, result));
  ATOLL_ASSIGN_OR_RETURN(Slice both, client->CreateSlice(2));
  std::vector<double> stream_rates;
  for (int r = 0; r < sweep.stream_runs; ++r) {
    ATOLL_ASSIGN_OR_RETURN(double rate, StreamedCalls(*client, both, sweep.stream));
    stream_rates.push_back(rate);
  }
  fmt::print("op-by-op stream of {} calls: {:.0f}/s\n", sweep.stream, Median(stream_rates));
  result.Add("op_by_op_stream", {{"calls", sweep.stream}, {"devices", 2}}, "calls_per_s", "1/s",
             stream_rates);
  result.Add("zmq_round_trip", {{"bytes", 64}}, "us_per_round_trip", "us", zmq_us);
  client.reset();
  Status stopped = cluster->Stop();
  if (stopped.ok()) stopped = MeasureConnectRate(connect, dir, result);
  std::filesystem::remove_all(dir);
  return stopped;
}

}  // namespace
}  // namespace atl::bench

int main(int argc, char** argv) {
  return atl::bench::RunBenchmark(
      argc, argv, "client", "the client's round trip and program rate against raw ZeroMQ",
      atl::bench::RunSweep, [](CLI::App& app) {
        app.add_flag("--connect-only", atl::bench::connect_only, "measure clients_connected alone");
      });
}
