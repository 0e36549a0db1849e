// bench/collectives: per-device bandwidth of each collective, against the same bytes moved
// through raw ZeroMQ in the same run.
//
// atoll: a 4-device slice of a cluster of 2 hosts x 2 cpu devices (plain text, as every
// benchmark series unless it says CURVE), its devices interleaving the hosts as placement
// spreads them, so every group spans both. Each device holds a block of B bytes (the row's
// `bytes_per_device`), resident in its store from an earlier run; a run calls one function
// whose outputs are a tiny replicated value, the only one read, and the collective's result,
// left on the devices. Its time is the run's, submit to that value, less the median time of
// the same function with a local copy in place of the collective (dispatch, reservations and
// the read cost both alike); runs of the two alternate. Bandwidth: B / that time.
//
// zmq: the bytes each host sends the other in that collective (its plan: the messages of
// services/executor/collective_plan.h, one per direction at most), exchanged at once between
// two DEALER sockets of two ZeroMQ contexts over tcp loopback, from the start until both have
// arrived; bandwidth: B / that time. A broadcast's root host alone sends. `derived` holds
// atoll's median bandwidth over raw ZeroMQ's per collective and size.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <latch>

#include <fmt/format.h>

#include "atoll/client.h"
#include "bench/common/bench_args.h"
#include "bench/common/bench_cluster.h"
#include "bench/common/bench_result.h"
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
  // seconds until both arrived.
  Result<double> Seconds(uint64_t ab, uint64_t ba) {
    std::vector<char> data(std::max(ab, ba));
    std::latch start(3);
    auto side = [&](zmq::socket_t& socket, uint64_t send, uint64_t receive) -> Status {
      start.arrive_and_wait();
      if (send > 0) {
        net::Frames frames;
        frames.emplace_back(data.data(), send);
        ATOLL_RETURN_IF_ERROR(net::SendFrames(socket, frames));
      }
      if (receive == 0) return Status::Ok();
      ATOLL_ASSIGN_OR_RETURN(auto got, net::RecvFrames(socket, kTimeout));
      if (!got || got->front().size() != receive) return Internal("the exchange lost a message");
      return Status::Ok();
    };
    auto at_a = std::async(std::launch::async, side, std::ref(a_), ab, ba);
    auto at_b = std::async(std::launch::async, side, std::ref(b_), ba, ab);
    start.arrive_and_wait();
    const auto begin = Clock::now();
    ATOLL_RETURN_IF_ERROR(at_a.get());
    ATOLL_RETURN_IF_ERROR(at_b.get());
    return std::chrono::duration<double>(Clock::now() - begin).count();
  }

 private:
  zmq::context_t context_a_;
  zmq::context_t context_b_;
  zmq::socket_t a_;
  zmq::socket_t b_;
};

// The programs of one block size: per layout, a block resident on the devices and the
// baseline copy; per kind, its collective.
class Programs {
 public:
  Programs(Client& client, const Slice& slice, int64_t elements)
      : client_(client), slice_(slice), elements_(elements) {}

  // f(x, t) = (t + 1, body(x)): the first output, tiny, is what a run waits for.
  Result<Program> Make(const Kind& kind, const std::string& name,
                       const std::function<Value(FunctionBuilder&, Value)>& body) {
    FunctionBuilder b(name);
    const Value x = b.Input(DType::kF32, GlobalShape(kind, elements_), LayoutOf(kind));
    const Value t = b.Input(DType::kF32, {1}, Sharding::Replicated());
    b.Output(b.Add(t, 1.0));
    b.Output(body(b, x));
    ATOLL_ASSIGN_OR_RETURN(Function fn, client_.Register(b, slice_));
    ProgramBuilder p;
    p.Return(
        p.Call(fn, {p.Arg(DType::kF32, GlobalShape(kind, elements_)), p.Arg(DType::kF32, {1})}));
    return p.Build();
  }

  // A block of `kind`'s layout on the devices: the future every run of it reads.
  Result<Future> Resident(const Kind& kind) {
    ATOLL_ASSIGN_OR_RETURN(Program init, Make(kind, "resident", [](FunctionBuilder& b, Value x) {
                             return b.Mul(x, 1.0);
                           }));
    ATOLL_ASSIGN_OR_RETURN(Run run,
                           client_.Submit(init, {Tensor(DType::kF32, GlobalShape(kind, elements_)),
                                                 Tensor::F32({1}, {0})}));
    ATOLL_RETURN_IF_ERROR(run.Wait(0, kTimeout).status());
    return run.Output(1);  // which keeps the run's objects
  }

  // Seconds from submit to the tiny output of one run of `program` on `x`.
  Result<double> Time(const Program& program, const Future& x) {
    const auto begin = Clock::now();
    ATOLL_ASSIGN_OR_RETURN(Run run, client_.Submit(program, {x, Tensor::F32({1}, {0})}));
    ATOLL_RETURN_IF_ERROR(run.Wait(0, kTimeout).status());
    return std::chrono::duration<double>(Clock::now() - begin).count();
  }

 private:
  Client& client_;
  const Slice& slice_;
  const int64_t elements_;
};

Status MeasureSize(Client& client, const Slice& slice, RawExchange& raw, uint64_t bytes, int reps,
                   BenchResult& result) {
  const auto elements = static_cast<int64_t>(bytes / 4);
  Programs programs(client, slice, elements);
  for (const Kind& kind : Kinds()) {
    ATOLL_ASSIGN_OR_RETURN(Future x, programs.Resident(kind));
    ATOLL_ASSIGN_OR_RETURN(
        Program copy,
        programs.Make(kind, "copy", [](FunctionBuilder& b, Value v) { return b.Mul(v, 1.0); }));
    ATOLL_ASSIGN_OR_RETURN(Program collective, programs.Make(kind, kind.name, kind.apply));
    const auto [ab, ba] = WireBytes(kind, elements);
    std::vector<double> copies, collectives, zmq;
    for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms up: connections, first reservations
      ATOLL_ASSIGN_OR_RETURN(double c, programs.Time(copy, x));
      ATOLL_ASSIGN_OR_RETURN(double t, programs.Time(collective, x));
      ATOLL_ASSIGN_OR_RETURN(double z, raw.Seconds(ab, ba));
      if (rep < 0) continue;
      copies.push_back(c);
      collectives.push_back(t);
      zmq.push_back(bytes / z);
    }
    const double base = Median(copies);
    std::vector<double> bandwidth;
    for (double t : collectives) {
      if (t > base) bandwidth.push_back(bytes / (t - base));
    }
    if (bandwidth.empty()) {
      return Internal(
          fmt::format("{} of {} B: no run took longer than the copy's median", kind.name, bytes));
    }
    const Params params = {{"collective", kind.name}, {"bytes_per_device", bytes}};
    result.Add("atoll", params, "bytes_per_s", "B/s", bandwidth);
    result.Add("zmq", params, "bytes_per_s", "B/s", zmq);
    result.Add("atoll_copy", params, "run_s", "s", copies);
    const double ratio = Median(bandwidth) / Median(zmq);
    result.Derive(fmt::format("{}_over_zmq_{}B", kind.name, bytes), ratio);
    fmt::print(
        "{:>18} {:>9} B/device: atoll {:8.1f} MB/s, zmq {:8.1f} MB/s ({} + {} B on the "
        "wire), ratio {:.3f}\n",
        kind.name, bytes, Median(bandwidth) / 1e6, Median(zmq) / 1e6, ab, ba, ratio);
    std::fflush(stdout);
  }
  return Status::Ok();
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
    for (uint64_t bytes : sizes) {
      ATOLL_RETURN_IF_ERROR(MeasureSize(*client, slice, raw, bytes, reps, result)
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
