// bench/dataplane: executor-to-executor throughput and latency of the data plane for 64 B,
// 64 KiB and 16 MiB tuples, against raw ZeroMQ between two processes in the same run.
//
// Sender: this process, through the executor's own sending half (TupleOutbox: batching,
// the TupleBatch header, small tensors packed into one frame, large ones borrowed into
// frames of their own), connected to the data socket of a real atoll-executor over tcp
// loopback. Receiver: that executor, doing what it does with every tuple (decode the
// batch, make each tuple a Tensor: copied out of the packed frame, or adopting its own
// frame; deliver it to the mailbox of a shard; here a shard of a run that never comes, all
// tuples under one key so that memory stays bounded). It counts what it received and when
// the latest batch was decoded, and publishes that as `dataplane.stats` every heartbeat; a
// figure is taken from the first report that holds every tuple sent.
//
// Series, alternated within each repetition:
//   zmq          one message per tuple from a DEALER to a DEALER in atoll-bench-zmq-sink,
//                which only receives (the least any receiver can do)
//   batched      TupleOutbox with a time window (kBatchedWindowUs) and 64 KiB batches
//   unbatched    TupleOutbox without a window, flushed after every tuple: one TupleBatch
//                per tuple, as when every loop turn of an executor finishes one shard
//   batched_curve  batched, into the executor of a second cluster whose sockets all speak
//                CURVE (this process sends as one of its members): what encryption and
//                authentication cost the data plane
// Throughput: N tuples sent back to back, from the first send to the last arrival (wall
// clock, one machine). Latency: one tuple at a time, send to arrival.
//
// Links (each row's `link` param), every series over each, the ratios to raw ZeroMQ taken
// over the same link:
//   loopback     both ends in this machine's network namespace, over 127.0.0.1
//   veth         the sender (this process) and the receivers (the clusters, the sink) on two
//                machines of a VirtualNetwork: network namespaces, each with a veth pair to
//                a bridge, as containers on one machine talk. Skipped, saying why, where
//                namespaces cannot be made (no CAP_NET_ADMIN).
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "bench/common/bench_args.h"
#include "bench/common/bench_cluster.h"
#include "bench/common/bench_result.h"
#include "common/net/event_reader.h"
#include "common/net/events.h"
#include "common/net/security.h"
#include "common/service/ready_file.h"
#include "launcher/local_cluster.h"
#include "launcher/process.h"
#include "launcher/virtual_network.h"
#include "services/executor/tuple_outbox.h"

namespace atl::bench {
namespace {

using namespace std::chrono_literals;
constexpr auto kTimeout = 60s;
constexpr uint32_t kBatchedWindowUs = 100;
constexpr uint64_t kBatchBytes = 64 << 10;
// The mailbox key every tuple is sent to: a run no client will ever submit.
constexpr uint64_t kNoRun = ~uint64_t{0};

// Heartbeats (and so dataplane.stats) every 10 ms: a figure waits at most that long for its
// report, which carries the arrival time itself.
BenchTopology ClusterTopology(const std::string& address, const std::string& security = "plain") {
  BenchTopology topology;
  topology.address = address;
  topology.security = security;
  topology.heartbeat_ms = 10;
  topology.liveness = 100;
  topology.device_memory_mb = 64;
  topology.arena_mb = 64;
  return topology;
}

struct Size {
  uint64_t bytes;
  uint64_t throughput_tuples;  // per throughput sample
  int latency_tuples;          // per latency sample (its median is the sample)
};

// Arrival times of what was sent, from whichever receiver the series uses.
class Receiver {
 public:
  virtual ~Receiver() = default;
  // Sends `count` tuples of `bytes` each, back to back, and returns the wall-clock
  // microseconds at which the last one arrived.
  virtual Result<int64_t> SendAndWait(const Tensor& tuple, uint64_t count) = 0;
};

// Raw ZeroMQ: a DEALER bound here, the sink's DEALER connected to it.
class RawZmq : public Receiver {
 public:
  explicit RawZmq(zmq::context_t& context)
      : socket_(net::MakeSocket(context, zmq::socket_type::dealer)) {}

  // Binds on `address` and starts the sink with `launch` (the sink's argv made into the
  // command that runs it where the receivers are).
  Status Start(const std::string& address,
               const std::function<std::vector<std::string>(std::vector<std::string>)>& launch,
               const std::string& log_path) {
    ATOLL_ASSIGN_OR_RETURN(std::string endpoint, net::Bind(socket_, "tcp://" + address + ":*"));
    ATOLL_ASSIGN_OR_RETURN(
        pid_, proc::Spawn({launch({ATOLL_BIN_DIR "/atoll-bench-zmq-sink", endpoint}), log_path}));
    ATOLL_ASSIGN_OR_RETURN(auto hello, net::RecvFrames(socket_, kTimeout));
    if (!hello) return DeadlineExceeded("atoll-bench-zmq-sink did not greet; see " + log_path);
    return Status::Ok();
  }

  ~RawZmq() override {
    net::Frames bye;
    bye.emplace_back(std::string_view("bye"));
    if (pid_ > 0 && net::SendFrames(socket_, bye).ok()) {
      // Reap it once it has read the goodbye (bounded: it exits at once).
      for (int i = 0; i < 100; ++i) {
        auto ended = proc::TryReap(pid_);
        if (!ended.ok() || ended->has_value()) return;
        pollfd none{-1, 0, 0};
        poll(&none, 0, 10);
      }
    }
  }

  Result<int64_t> SendAndWait(const Tensor& tuple, uint64_t count) override {
    net::Frames request;
    request.emplace_back(std::string_view("count"));
    request.emplace_back(&count, sizeof(count));
    ATOLL_RETURN_IF_ERROR(net::SendFrames(socket_, request));
    for (uint64_t i = 0; i < count; ++i) {
      // The copy a zmq_send of an application's buffer makes.
      zmq::message_t message(tuple.data(), tuple.nbytes());
      if (!socket_.send(message, zmq::send_flags::none)) {
        return Unavailable("send to atoll-bench-zmq-sink timed out");
      }
    }
    ATOLL_ASSIGN_OR_RETURN(auto reply, net::RecvFrames(socket_, kTimeout));
    int64_t last_us = 0;
    if (!reply || reply->size() != 1 || (*reply)[0].size() != sizeof(last_us)) {
      return DeadlineExceeded("atoll-bench-zmq-sink did not report its arrivals");
    }
    std::memcpy(&last_us, (*reply)[0].data(), sizeof(last_us));
    return last_us;
  }

 private:
  zmq::socket_t socket_;
  pid_t pid_ = -1;
};

// The executor's own reports of what its data plane received.
class ExecutorReports {
 public:
  ExecutorReports(zmq::context_t& context, const std::string& events_out)
      : socket_(net::MakeSocket(context, zmq::socket_type::sub)), endpoint_(events_out) {}

  Status Start() {
    socket_.set(zmq::sockopt::subscribe, "dataplane.stats");
    ATOLL_RETURN_IF_ERROR(net::Connect(socket_, endpoint_));
    // A subscription takes effect a moment after connecting: the first report says so.
    return WaitFor(0).status();
  }

  // The arrival time of the latest batch, once the executor has received `tuples` in all.
  Result<int64_t> WaitFor(uint64_t tuples) {
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    while (std::chrono::steady_clock::now() < deadline) {
      ATOLL_ASSIGN_OR_RETURN(auto frames, net::RecvFrames(socket_, 1000ms));
      if (!frames || frames->size() != 2) continue;
      ATOLL_ASSIGN_OR_RETURN(Event e, DecodeEvent((*frames)[0], (*frames)[1]));
      if (e.fields["tuples_in"].get<uint64_t>() >= tuples) {
        return e.fields["last_in_us"].get<int64_t>();
      }
    }
    return DeadlineExceeded(fmt::format(
        "the executor did not report {} tuples received within {} s", tuples, kTimeout.count()));
  }

 private:
  zmq::socket_t socket_;
  std::string endpoint_;
};

// The executor's sending half, into a real executor's data socket.
class Executor : public Receiver {
 public:
  Executor(zmq::context_t& context, const std::string& data_endpoint, uint32_t window_us,
           ExecutorReports& reports, uint64_t& received)
      : outbox_(context, {.batch_bytes = kBatchBytes, .batch_window_us = window_us}),
        endpoint_(data_endpoint),
        reports_(reports),
        received_(received) {}

  Status Start() { return outbox_.Start(); }

  Result<int64_t> SendAndWait(const Tensor& tuple, uint64_t count) override {
    proto::TupleHeader h;
    h.run_id = kNoRun;
    const uint64_t target = outbox_.stats().tuples + count;
    for (uint64_t i = 0; i < count; ++i) {
      // The producing shard's output, which the outbox takes over (a copy, as the raw
      // series copies into its message).
      outbox_.Add(endpoint_, h, Tensor(tuple), /*urgent=*/false);
      ATOLL_RETURN_IF_ERROR(Flush());  // the end of an executor's loop turn
    }
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    while (outbox_.stats().tuples < target) {
      // The rest waits for the window: the executor's loop polls the same timer.
      pollfd timer{outbox_.timer_fd(), POLLIN, 0};
      poll(&timer, 1, 1000);
      ATOLL_RETURN_IF_ERROR(Flush());
      if (std::chrono::steady_clock::now() > deadline) {
        return DeadlineExceeded("the outbox kept tuples past its window");
      }
    }
    received_ += count;
    return reports_.WaitFor(received_);
  }

 private:
  Status Flush() {
    auto errors = outbox_.Flush();
    return errors.empty() ? Status::Ok() : errors.front();
  }

  executor::TupleOutbox outbox_;
  std::string endpoint_;
  ExecutorReports& reports_;
  uint64_t& received_;  // by the executor, over every series that sends to it
};

// Where the series run: the sender is this process, the receivers are the clusters'
// executors and the raw series' sink.
struct Link {
  std::string name;                   // the rows' `link` param
  VirtualNetwork* network = nullptr;  // its machines "sender" and "receiver"; none: loopback

  std::string Address(const std::string& machine) const {
    return network != nullptr ? network->Address(machine) : "127.0.0.1";
  }
  // Moves this thread (what it starts from now on: processes, sockets' I/O threads) onto
  // the machine.
  Status Enter(const std::string& machine) const {
    return network != nullptr ? network->Enter(machine) : Status::Ok();
  }
  // The command that runs `argv` on the receiver.
  std::vector<std::string> OnReceiver(std::vector<std::string> argv) const {
    return network != nullptr ? network->Inside("receiver", argv) : argv;
  }
};

// [series][tuple bytes] -> one sample per repetition
using Samples = std::map<std::pair<std::string, uint64_t>, std::vector<double>>;
struct Figures {
  Samples rate, bandwidth, latency;
};

const std::vector<std::string> kSeries = {"zmq", "batched", "unbatched", "batched_curve"};

// Every series over `link`, `repetitions` times, into `figures`.
Status MeasureOver(const Link& link, int repetitions, const std::vector<Size>& sizes,
                   Figures& figures) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          fmt::format("atoll-bench-dataplane-{}-{}", getpid(), link.name);
  const std::string receiver = link.Address("receiver");
  ATOLL_RETURN_IF_ERROR(link.Enter("receiver"));
  ATOLL_ASSIGN_OR_RETURN(
      std::unique_ptr<LocalCluster> cluster,
      StartBenchCluster(dir, ClusterToml(ClusterTopology(receiver)), ATOLL_BIN_DIR));
  ATOLL_ASSIGN_OR_RETURN(auto ready, ReadReadyFile(dir + "/state/run/executor-h0.ready"));
  const std::string data_endpoint = ready["data"];

  ATOLL_ASSIGN_OR_RETURN(
      std::unique_ptr<LocalCluster> curve_cluster,
      StartBenchCluster(dir + "/curve", ClusterToml(ClusterTopology(receiver, "curve")),
                        ATOLL_BIN_DIR));
  ATOLL_ASSIGN_OR_RETURN(auto curve_ready,
                         ReadReadyFile(dir + "/curve/state/run/executor-h0.ready"));
  ATOLL_ASSIGN_OR_RETURN(net::Credentials member,
                         net::ServiceCredentials(curve_cluster->keys_dir()));

  // Every context and socket from here on is the sender's.
  ATOLL_RETURN_IF_ERROR(link.Enter("sender"));
  zmq::context_t context;
  net::KeyedContext curve_context(member);
  RawZmq zmq(context);
  ATOLL_RETURN_IF_ERROR(zmq.Start(
      link.Address("sender"), [&](std::vector<std::string> argv) { return link.OnReceiver(argv); },
      dir + "/zmq-sink.log"));
  ExecutorReports reports(context, cluster->info().events_out);
  ATOLL_RETURN_IF_ERROR(reports.Start());
  uint64_t received = 0;
  Executor batched(context, data_endpoint, kBatchedWindowUs, reports, received);
  Executor unbatched(context, data_endpoint, 0, reports, received);
  ATOLL_RETURN_IF_ERROR(batched.Start());
  ATOLL_RETURN_IF_ERROR(unbatched.Start());
  ExecutorReports curve_reports(curve_context, curve_cluster->info().events_out);
  ATOLL_RETURN_IF_ERROR(curve_reports.Start());
  uint64_t curve_received = 0;
  Executor batched_curve(curve_context, curve_ready["data"], kBatchedWindowUs, curve_reports,
                         curve_received);
  ATOLL_RETURN_IF_ERROR(batched_curve.Start());
  const std::map<std::string, Receiver*> receivers = {{"zmq", &zmq},
                                                      {"batched", &batched},
                                                      {"unbatched", &unbatched},
                                                      {"batched_curve", &batched_curve}};

  for (int rep = 0; rep < repetitions; ++rep) {
    for (const Size& size : sizes) {
      const Tensor tuple(DType::kI32, {static_cast<int64_t>(size.bytes / 4)});
      for (const std::string& name : kSeries) {
        Receiver* receiver_of_series = receivers.at(name);
        const int64_t start = NowMicros();
        ATOLL_ASSIGN_OR_RETURN(int64_t last,
                               receiver_of_series->SendAndWait(tuple, size.throughput_tuples));
        const double seconds = std::max<int64_t>(last - start, 1) / 1e6;
        figures.rate[{name, size.bytes}].push_back(size.throughput_tuples / seconds);
        figures.bandwidth[{name, size.bytes}].push_back(size.throughput_tuples * size.bytes /
                                                        seconds / 1e9);
        std::vector<double> one_way;
        for (int i = 0; i < size.latency_tuples; ++i) {
          const int64_t sent = NowMicros();
          ATOLL_ASSIGN_OR_RETURN(int64_t arrived, receiver_of_series->SendAndWait(tuple, 1));
          one_way.push_back(static_cast<double>(arrived - sent));
        }
        ATOLL_ASSIGN_OR_RETURN(Summary s, Summarize(one_way));
        figures.latency[{name, size.bytes}].push_back(s.median);
      }
    }
    std::fprintf(stderr, "dataplane: %s: repetition %d of %d done\n", link.name.c_str(), rep + 1,
                 repetitions);
  }
  return Status::Ok();
}

double Median(const Samples& samples, const std::string& series, uint64_t bytes) {
  return Summarize(samples.at({series, bytes})).value().median;
}

// The rows of one link, and its ratios: to raw ZeroMQ over the same link, of batching, and
// of CURVE. Figures derived over veth are named `veth_...`; over loopback they keep the
// names they had before there were links.
void Report(const std::string& link, const std::vector<Size>& sizes, const Figures& f,
            BenchResult& result) {
  for (const std::string& name : kSeries) {
    for (const Size& size : sizes) {
      const Params params = {{"link", link}, {"tuple_bytes", size.bytes}};
      result.Add(name, params, "tuples_per_s", "1/s", f.rate.at({name, size.bytes}));
      result.Add(name, params, "throughput", "GB/s", f.bandwidth.at({name, size.bytes}));
      result.Add(name, params, "latency", "us", f.latency.at({name, size.bytes}));
    }
  }
  const std::string prefix = link == "loopback" ? "" : link + "_";
  for (uint64_t bytes : {uint64_t{64} << 10, uint64_t{16} << 20}) {
    result.Derive(fmt::format("{}batched_over_zmq_throughput_{}B", prefix, bytes),
                  Median(f.rate, "batched", bytes) / Median(f.rate, "zmq", bytes));
    result.Derive(fmt::format("{}unbatched_over_zmq_throughput_{}B", prefix, bytes),
                  Median(f.rate, "unbatched", bytes) / Median(f.rate, "zmq", bytes));
  }
  result.Derive(prefix + "batched_over_unbatched_throughput_64B",
                Median(f.rate, "batched", 64) / Median(f.rate, "unbatched", 64));
  result.Derive(prefix + "batched_over_zmq_throughput_64B",
                Median(f.rate, "batched", 64) / Median(f.rate, "zmq", 64));
  for (uint64_t bytes : {uint64_t{64}, uint64_t{64} << 10, uint64_t{16} << 20}) {
    result.Derive(fmt::format("{}batched_curve_over_batched_throughput_{}B", prefix, bytes),
                  Median(f.rate, "batched_curve", bytes) / Median(f.rate, "batched", bytes));
    result.Derive(fmt::format("{}batched_curve_over_batched_latency_{}B", prefix, bytes),
                  Median(f.latency, "batched_curve", bytes) / Median(f.latency, "batched", bytes));
  }
}

Status MeasureAll(const BenchOptions& options, BenchResult& result) {
  const int repetitions = options.quick ? 3 : 7;
  const std::vector<Size> sizes =
      options.quick
          ? std::vector<Size>{{64, 50'000, 5}, {64 << 10, 1'000, 5}, {16 << 20, 12, 3}}
          : std::vector<Size>{{64, 400'000, 15}, {64 << 10, 8'000, 15}, {16 << 20, 60, 5}};
  Figures loopback;
  ATOLL_RETURN_IF_ERROR(MeasureOver({"loopback"}, repetitions, sizes, loopback));
  Report("loopback", sizes, loopback, result);

  auto network = VirtualNetwork::Create({"sender", "receiver"});
  if (network.status().code() == Code::kFailedPrecondition) {
    std::fprintf(stderr, "dataplane: no rows over veth: %s\n", network.status().ToString().c_str());
    return Status::Ok();
  }
  ATOLL_RETURN_IF_ERROR(network.status());
  Figures veth;
  ATOLL_RETURN_IF_ERROR(MeasureOver({"veth", network->get()}, repetitions, sizes, veth));
  Report("veth", sizes, veth, result);
  // What the link itself costs: raw ZeroMQ over veth against loopback.
  for (uint64_t bytes : {uint64_t{64}, uint64_t{64} << 10, uint64_t{16} << 20}) {
    result.Derive(fmt::format("veth_zmq_over_loopback_zmq_throughput_{}B", bytes),
                  Median(veth.rate, "zmq", bytes) / Median(loopback.rate, "zmq", bytes));
  }
  return Status::Ok();
}

}  // namespace
}  // namespace atl::bench

int main(int argc, char** argv) {
  return atl::bench::RunBenchmark(
      argc, argv, "dataplane",
      "executor-to-executor tuple throughput and latency, batching on and off, against raw "
      "ZeroMQ",
      atl::bench::MeasureAll);
}
