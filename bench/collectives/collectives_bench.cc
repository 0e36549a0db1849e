// bench/collectives: per-device bandwidth of each collective, against the same bytes moved
// through raw ZeroMQ in the same run.
//
// atoll: a 4-device slice of a cluster of 2 hosts x 2 cpu devices (plain text, as every
// benchmark series unless it says CURVE), its devices interleaving the hosts as placement
// spreads them, so every group spans both. Each device holds a block of B bytes (the row's
// `bytes_per_device`), resident in its store from an earlier run; a run calls one function,
// the collective on that block. Its time is the gang's, as the executors report it
// (`gang.done`: each shard's start and end on the device): from the last shard's start, when
// the whole gang is in, to the last shard's end; dispatch, reservations and the results'
// writes and reads are outside it. Bandwidth: B / that time.
//
// zmq: the bytes each host sends the other in that collective (its plan: the messages of
// services/executor/collective_plan.h, one per direction at most), exchanged at once between
// two DEALER sockets of two ZeroMQ contexts over tcp loopback, from the first send until
// both have arrived; bandwidth: B / that time. A broadcast's root host alone sends.
// `derived` holds atoll's median bandwidth over raw ZeroMQ's per collective and size.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <latch>
#include <map>

#include <fmt/format.h>

#include "atoll/client.h"
#include "bench/common/bench_args.h"
#include "bench/common/bench_cluster.h"
#include "bench/common/bench_result.h"
#include "common/net/event_reader.h"
#include "common/net/transport.h"
#include "services/executor/collective_hub.h"
#include "services/executor/collective_items.h"
#include "services/executor/collective_plan.h"

namespace atl::bench {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = 60s;
constexpr int64_t kDevices = 4;

// One collective as the bench runs it: on a replicated-typed block [E] (each device its own
// value) or on x [4, E] cut over the slice (each device its row), E = B / 4 floats. `op` is
// the same collective as the executors run it, for its plan.
struct Kind {
  std::string name;
  bool cut;
  std::function<Value(FunctionBuilder&, Value)> apply;
  executor::CollectiveOp op;
};

executor::CollectiveOp OpOf(ir::OpCode code, int32_t axis = 0) {
  executor::CollectiveOp op;
  op.code = code;
  op.mesh = {kDevices};
  op.axis = axis;
  op.dim = 0;
  op.to_dim = 1;
  op.root = 0;
  op.target_of = {1, 2, 3, 0};
  return op;
}

const std::vector<Kind>& Kinds() {
  static const std::vector<Kind> kinds = {
      {"all_reduce_sum", false, [](FunctionBuilder& b, Value x) { return b.AllReduceSum(x); },
       OpOf(ir::OpCode::kAllReduceSum, ir::kWholeSlice)},
      {"all_gather", true, [](FunctionBuilder& b, Value x) { return b.AllGather(x, 0); },
       OpOf(ir::OpCode::kAllGather)},
      {"reduce_scatter", false,
       [](FunctionBuilder& b, Value x) { return b.ReduceScatter(x, 0, 0); },
       OpOf(ir::OpCode::kReduceScatter)},
      {"all_to_all", true, [](FunctionBuilder& b, Value x) { return b.AllToAll(x, 0, 1); },
       OpOf(ir::OpCode::kAllToAll)},
      {"broadcast", false, [](FunctionBuilder& b, Value x) { return b.Broadcast(x, 0, 0); },
       OpOf(ir::OpCode::kBroadcast)},
      {"collective_permute", true,
       [](FunctionBuilder& b, Value x) {
         return b.CollectivePermute(x, 0, {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
       },
       OpOf(ir::OpCode::kCollectivePermute)},
  };
  return kinds;
}

Shape GlobalShape(const Kind& kind, int64_t elements) {
  return kind.cut ? Shape{kDevices, elements} : Shape{elements};
}
Sharding LayoutOf(const Kind& kind) {
  return kind.cut ? Sharding::Split(0) : Sharding::Replicated();
}

// The bytes host 0 and host 1 of an interleaved 2-host gang each send the other in `kind`
// over blocks of `elements` floats: the items of its plan's messages.
std::pair<uint64_t, uint64_t> WireBytes(const Kind& kind, int64_t elements) {
  const executor::CollectiveOp& op = kind.op;
  const executor::GangLayout layout({"h0", "h1", "h0", "h1"});
  const Shape block = kind.cut ? Shape{1, elements} : Shape{elements};
  const auto item = static_cast<uint64_t>(NumElements(executor::ItemShape(op, block))) * 4;
  uint64_t bytes[2] = {0, 0};
  for (uint32_t h = 0; h < 2; ++h) {
    const executor::HostPlan plan =
        executor::PlanFor(op, layout, h, executor::CollectiveHub::kAllPairsMaxHosts);
    for (const auto& [to, keys] : plan.sends) bytes[h] += keys.size() * item;
  }
  return {bytes[0], bytes[1]};
}

// Raw ZeroMQ between two contexts (an I/O thread each, as two processes have).
class RawExchange {
 public:
  RawExchange()
      : a_(net::MakeSocket(context_a_, zmq::socket_type::dealer)),
        b_(net::MakeSocket(context_b_, zmq::socket_type::dealer)) {}

  Status Connect() {
    ATOLL_ASSIGN_OR_RETURN(std::string endpoint, net::Bind(a_, "tcp://127.0.0.1:*"));
    ATOLL_RETURN_IF_ERROR(net::Connect(b_, endpoint));
    // One round trip first: the connection is up before anything is timed.
    ATOLL_ASSIGN_OR_RETURN(double warm, Seconds(1, 1));
    (void)warm;
    return Status::Ok();
  }

  // Sends `ab` bytes from a to b and `ba` bytes from b to a at once (none when 0); the
  // seconds from the first send until both arrived, as each side's own clock readings say.
  Result<double> Seconds(uint64_t ab, uint64_t ba) {
    std::vector<char> data(std::max(ab, ba));
    std::latch start(2);
    using Span = std::pair<Clock::time_point, Clock::time_point>;
    auto side = [&](zmq::socket_t& socket, uint64_t send, uint64_t receive) -> Result<Span> {
      start.arrive_and_wait();
      const auto begin = Clock::now();
      if (send > 0) {
        net::Frames frames;
        frames.emplace_back(data.data(), send);
        ATOLL_RETURN_IF_ERROR(net::SendFrames(socket, frames));
      }
      if (receive > 0) {
        ATOLL_ASSIGN_OR_RETURN(auto got, net::RecvFrames(socket, kTimeout));
        if (!got || got->front().size() != receive) return Internal("the exchange lost a message");
      }
      return Span{begin, Clock::now()};
    };
    auto at_a = std::async(std::launch::async, side, std::ref(a_), ab, ba);
    auto at_b = std::async(std::launch::async, side, std::ref(b_), ba, ab);
    ATOLL_ASSIGN_OR_RETURN(const Span a, at_a.get());
    ATOLL_ASSIGN_OR_RETURN(const Span b, at_b.get());
    return std::chrono::duration<double>(std::max(a.second, b.second) - std::min(a.first, b.first))
        .count();
  }

 private:
  zmq::context_t context_a_;
  zmq::context_t context_b_;
  zmq::socket_t a_;
  zmq::socket_t b_;
};

// The executors' reports of the gangs they ran (`gang.done`).
class GangTimes {
 public:
  GangTimes(zmq::context_t& context, std::string events_out)
      : socket_(net::MakeSocket(context, zmq::socket_type::sub)),
        endpoint_(std::move(events_out)) {}

  Status Connect() {
    socket_.set(zmq::sockopt::subscribe, "gang.done");
    return net::Connect(socket_, endpoint_);
  }

  // Seconds from the last of run `run`'s `shards` shards starting to the last one ending, once
  // all reported; DeadlineExceeded after `wait` (a subscription takes effect a moment after
  // connecting, so a run that early may go unreported).
  Result<double> GangSeconds(uint64_t run, uint32_t shards, std::chrono::milliseconds wait) {
    const auto deadline = Clock::now() + wait;
    while (reports_[run].size() < shards && Clock::now() < deadline) {
      ATOLL_ASSIGN_OR_RETURN(auto frames, net::RecvFrames(socket_, 100ms));
      if (!frames || frames->size() != 2) continue;
      ATOLL_ASSIGN_OR_RETURN(Event e, DecodeEvent((*frames)[0], (*frames)[1]));
      reports_[e.fields["run"].get<uint64_t>()].push_back(
          {e.fields["start_us"].get<int64_t>(), e.fields["end_us"].get<int64_t>()});
    }
    const std::vector<std::pair<int64_t, int64_t>> got = std::move(reports_[run]);
    reports_.erase(run);
    if (got.size() < shards) {
      return DeadlineExceeded(
          fmt::format("run {}: {} of {} shards reported", run, got.size(), shards));
    }
    int64_t start = 0, end = 0;
    for (const auto& [s, e] : got) {
      start = std::max(start, s);
      end = std::max(end, e);
    }
    return static_cast<double>(end - start) / 1e6;
  }

 private:
  zmq::socket_t socket_;
  std::string endpoint_;
  std::map<uint64_t, std::vector<std::pair<int64_t, int64_t>>> reports_;  // by run
};

// The programs of one block size: per kind, its block resident on the devices and its
// collective.
class Programs {
 public:
  Programs(Client& client, const Slice& slice, int64_t elements)
      : client_(client), slice_(slice), elements_(elements) {}

  Result<Program> Make(const Kind& kind, const std::string& name,
                       const std::function<Value(FunctionBuilder&, Value)>& body) {
    FunctionBuilder b(name);
    b.Output(body(b, b.Input(DType::kF32, GlobalShape(kind, elements_), LayoutOf(kind))));
    ATOLL_ASSIGN_OR_RETURN(Function fn, client_.Register(b, slice_));
    ProgramBuilder p;
    p.Return(p.Call(fn, {p.Arg(DType::kF32, GlobalShape(kind, elements_))}));
    return p.Build();
  }

  // A block of `kind`'s layout on the devices: the future every run of it reads.
  Result<Future> Resident(const Kind& kind) {
    ATOLL_ASSIGN_OR_RETURN(Program init, Make(kind, "resident", [](FunctionBuilder& b, Value x) {
                             return b.Mul(x, 1.0);
                           }));
    ATOLL_ASSIGN_OR_RETURN(
        Run run, client_.Submit(init, {Tensor(DType::kF32, GlobalShape(kind, elements_))}));
    return run.Output(0);  // which keeps the run's objects
  }

  // The gang's seconds in one run of `program` on `x` (its result is left on the devices).
  Result<double> Time(const Program& program, const Future& x, GangTimes& gangs,
                      std::chrono::milliseconds wait = kTimeout) {
    ATOLL_ASSIGN_OR_RETURN(Run run, client_.Submit(program, {x}));
    return gangs.GangSeconds(run.id(), kDevices, wait);
  }

 private:
  Client& client_;
  const Slice& slice_;
  const int64_t elements_;
};

Status MeasureSize(Client& client, const Slice& slice, GangTimes& gangs, RawExchange& raw,
                   uint64_t bytes, int reps, BenchResult& result) {
  const auto elements = static_cast<int64_t>(bytes / 4);
  Programs programs(client, slice, elements);
  struct Prepared {
    Future x;
    Program collective;
    std::pair<uint64_t, uint64_t> wire;
  };
  std::vector<Prepared> prepared;
  for (const Kind& kind : Kinds()) {
    ATOLL_ASSIGN_OR_RETURN(Future x, programs.Resident(kind));
    ATOLL_ASSIGN_OR_RETURN(Program collective, programs.Make(kind, kind.name, kind.apply));
    prepared.push_back({std::move(x), std::move(collective), WireBytes(kind, elements)});
  }
  // Rounds of every collective in turn, so that drift in the machine's load hits all alike;
  // round -1 warms up (connections, the processes' first large allocations).
  std::vector<std::vector<double>> atoll(prepared.size()), zmq(prepared.size());
  for (int round = -1; round < reps; ++round) {
    for (size_t k = 0; k < prepared.size(); ++k) {
      Prepared& p = prepared[k];
      ATOLL_ASSIGN_OR_RETURN(double gang, programs.Time(p.collective, p.x, gangs));
      ATOLL_ASSIGN_OR_RETURN(double exchange, raw.Seconds(p.wire.first, p.wire.second));
      if (round < 0) continue;
      atoll[k].push_back(bytes / gang);
      zmq[k].push_back(bytes / exchange);
    }
  }
  for (size_t k = 0; k < prepared.size(); ++k) {
    const Kind& kind = Kinds()[k];
    const Params params = {{"collective", kind.name}, {"bytes_per_device", bytes}};
    result.Add("atoll", params, "bytes_per_s", "B/s", atoll[k]);
    result.Add("zmq", params, "bytes_per_s", "B/s", zmq[k]);
    const double ratio = Median(atoll[k]) / Median(zmq[k]);
    result.Derive(fmt::format("{}_over_zmq_{}B", kind.name, bytes), ratio);
    fmt::print(
        "{:>18} {:>9} B/device: atoll {:8.1f} MB/s, zmq {:8.1f} MB/s ({} + {} B on the "
        "wire), ratio {:.3f}\n",
        kind.name, bytes, Median(atoll[k]) / 1e6, Median(zmq[k]) / 1e6, prepared[k].wire.first,
        prepared[k].wire.second, ratio);
  }
  std::fflush(stdout);
  return Status::Ok();
}

// Runs a small all-reduce until its gang is reported: the subscription is in effect.
Status AwaitReports(Client& client, const Slice& slice, GangTimes& gangs) {
  Programs programs(client, slice, 4);
  const Kind& kind = Kinds().front();
  ATOLL_ASSIGN_OR_RETURN(Future x, programs.Resident(kind));
  ATOLL_ASSIGN_OR_RETURN(Program probe, programs.Make(kind, "probe", kind.apply));
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (programs.Time(probe, x, gangs, 200ms).ok()) return Status::Ok();
  }
  return DeadlineExceeded("no gang.done event came from the executors");
}

Status Measure(const BenchOptions& options, BenchResult& result) {
  const std::vector<uint64_t> sizes = options.quick
                                          ? std::vector<uint64_t>{64 << 10, 1 << 20}
                                          : std::vector<uint64_t>{64 << 10, 1 << 20, 8 << 20};
  const int reps = options.quick ? 5 : 15;
  const std::string dir =
      std::filesystem::temp_directory_path() / fmt::format("atoll-bench-collectives-{}", getpid());
  BenchTopology topology;
  topology.hosts = 2;
  topology.devices_per_host = 2;
  topology.kind = "cpu";
  topology.device_memory_mb = 128;  // a gathered 8 MiB block is 32 MiB
  topology.arena_mb = 128;
  ATOLL_ASSIGN_OR_RETURN(auto cluster,
                         StartBenchCluster(dir, ClusterToml(topology), ATOLL_BIN_DIR));
  Status measured = [&]() -> Status {
    ATOLL_ASSIGN_OR_RETURN(auto client, Client::Connect({.rm_endpoint = cluster->info().rm_endpoint,
                                                         .name = "bench-collectives"}));
    ATOLL_ASSIGN_OR_RETURN(Slice slice, client->CreateSlice(kDevices, "island0"));
    RawExchange raw;
    ATOLL_RETURN_IF_ERROR(raw.Connect());
    zmq::context_t context;
    GangTimes gangs(context, cluster->info().events_out);
    ATOLL_RETURN_IF_ERROR(gangs.Connect());
    ATOLL_RETURN_IF_ERROR(AwaitReports(*client, slice, gangs));
    for (uint64_t bytes : sizes) {
      ATOLL_RETURN_IF_ERROR(MeasureSize(*client, slice, gangs, raw, bytes, reps, result)
                                .WithContext(fmt::format("{} B per device", bytes)));
    }
    return Status::Ok();
  }();
  (void)cluster->Stop();
  std::filesystem::remove_all(dir);
  return measured;
}

}  // namespace
}  // namespace atl::bench

int main(int argc, char** argv) {
  return atl::bench::RunBenchmark(
      argc, argv, "collectives",
      "per-device bandwidth of each collective on 4 devices of 2 hosts against the same bytes "
      "through raw ZeroMQ",
      atl::bench::Measure);
}
