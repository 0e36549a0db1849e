// bench/pipeline: training throughput of the pipelined residual MLP of examples/pipeline
// (S stages, one per device, M micro-batches per step, GPipe schedule) on one island and
// split over two islands joined only by DCN transfers, against the ideal bubble bound and
// against the same model trained data-parallel on the same S devices, for S = 4, 8, 16 and
// M = 4, 16, 64.
//
// Devices are `sim` devices: every block call spins for a modelled compute time (forward
// kForwardUs, backward kBackwardUs per micro-batch) while the real dataflow runs (the cpu
// kernels compute the blocks' small arithmetic, activations go forward and gradients back
// between devices, each stage sums its gradients and takes an SGD step). On a 2-core machine
// real arithmetic on 16 devices would measure CPU contention, not the runtime.
//
// Figures per point (one sample per round: the mean over its training steps but the first):
//   examples_per_s  rows trained per second; ideal_bound is the pipeline's, computed:
//                   M micro-batches in (M + S - 1) (t_fwd + t_bwd)
//   efficiency      measured / the series' own ideal step time: the pipeline's above,
//                   data parallel's M (t_fwd + t_bwd) (each device runs all S blocks on
//                   M/S micro-batches' worth of rows)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "atoll/client.h"
#include "bench/common/bench_args.h"
#include "bench/common/bench_cluster.h"
#include "bench/common/bench_result.h"
#include "examples/pipeline/data_parallel.h"
#include "examples/pipeline/pipeline.h"
#include "launcher/local_cluster.h"

namespace atl::bench {
namespace {

using examples::PipelineConfig;
using examples::PipelineStep;

constexpr double kForwardUs = 2000;
constexpr double kBackwardUs = 2 * kForwardUs;
constexpr int kDevicesPerHost = 4;

// S devices in all, on one island or half on each of two: hosts of up to 4 devices.
BenchTopology Topology(int stages, int islands) {
  const int per_island = stages / islands;
  BenchTopology topology;
  topology.islands = islands;
  topology.devices_per_host = std::min(kDevicesPerHost, per_island);
  topology.hosts = per_island / topology.devices_per_host;
  return topology;
}

// The ideal step time of the pipeline: the last micro-batch leaves stage 0 after M forward
// slots and reaches the end S - 1 slots later; backward likewise.
double PipelineIdealS(int stages, int micro_batches) {
  return (micro_batches + stages - 1) * (kForwardUs + kBackwardUs) * 1e-6;
}

// Every device busy all the time on its M/S micro-batches' worth of all S blocks.
double DataParallelIdealS(int micro_batches) {
  return micro_batches * (kForwardUs + kBackwardUs) * 1e-6;
}

struct Series {
  std::vector<double> examples_per_s;
  std::vector<double> efficiency;
};

// Trains `c.steps` steps with `train` and adds one sample to `series`: the mean step time
// over every step after the first (lowering and the first submission). Steps are timed
// between consecutive losses read by the client, so a late read makes one step look long
// and the next short; their mean is unaffected.
template <typename TrainFn>
Status Measure(const PipelineConfig& c, double ideal_s, Series& series, TrainFn train) {
  double measured_s = 0;
  auto on_step = [&](const PipelineStep& step) {
    if (step.step > 1) measured_s += step.elapsed.count();
  };
  ATOLL_RETURN_IF_ERROR(train(on_step).status());
  const double step_s = measured_s / (c.steps - 1);
  series.examples_per_s.push_back(static_cast<double>(c.micro_batch * c.micro_batches) / step_s);
  series.efficiency.push_back(ideal_s / step_s);
  return Status::Ok();
}

// Stage s on its own 1-device slice, the second half on island1 when `islands` is 2.
Result<std::vector<Slice>> StageSlices(Client& client, int stages, int islands) {
  std::vector<Slice> slices;
  for (int s = 0; s < stages; ++s) {
    const bool second = islands == 2 && s >= stages / 2;
    ATOLL_ASSIGN_OR_RETURN(Slice slice, client.CreateSlice(1, second ? "island1" : "island0"));
    slices.push_back(slice);
  }
  return slices;
}

Status MeasurePipeline(LocalCluster& cluster, const PipelineConfig& c, int islands,
                       Series& series) {
  ATOLL_ASSIGN_OR_RETURN(auto client, Client::Connect({.rm_endpoint = cluster.info().rm_endpoint,
                                                       .name = "bench-pipeline"}));
  ATOLL_ASSIGN_OR_RETURN(std::vector<Slice> slices, StageSlices(*client, c.stages, islands));
  return Measure(c, PipelineIdealS(c.stages, c.micro_batches), series, [&](const auto& on_step) {
    return examples::TrainPipeline(*client, slices, c, on_step);
  });
}

Status MeasureDataParallel(LocalCluster& cluster, const PipelineConfig& c, Series& series) {
  ATOLL_ASSIGN_OR_RETURN(auto client, Client::Connect({.rm_endpoint = cluster.info().rm_endpoint,
                                                       .name = "bench-data-parallel"}));
  ATOLL_ASSIGN_OR_RETURN(Slice slice, client->CreateSlice(c.stages, "island0"));
  return Measure(c, DataParallelIdealS(c.micro_batches), series, [&](const auto& on_step) {
    return examples::TrainDataParallel(*client, slice, c, on_step);
  });
}

void AddSeries(BenchResult& result, const std::string& name, const Params& params,
               const Series& s) {
  result.Add(name, params, "examples_per_s", "1/s", s.examples_per_s);
  result.Add(name, params, "efficiency", "ratio", s.efficiency);
}

Status RunSweep(const BenchOptions& options, BenchResult& result) {
  const std::vector<int> all_stages =
      options.quick ? std::vector<int>{4, 16} : std::vector<int>{4, 8, 16};
  const std::vector<int> all_micro_batches =
      options.quick ? std::vector<int>{4, 16} : std::vector<int>{4, 16, 64};
  // Rounds of every series in turn, so that drift in the machine's load hits all alike.
  const int rounds = options.quick ? 2 : 5;  // one sample each
  const int steps = options.quick ? 3 : 5;   // per round; the first is not measured
  const std::string dir =
      std::filesystem::temp_directory_path() / fmt::format("atoll-bench-pipeline-{}", getpid());
  for (int stages : all_stages) {
    const size_t n = all_micro_batches.size();
    std::vector<Series> one(n), two(n), data_parallel(n);
    std::unique_ptr<LocalCluster> clusters[2];  // one island; two islands
    for (int islands : {1, 2}) {
      ATOLL_ASSIGN_OR_RETURN(
          clusters[islands - 1],
          StartBenchCluster(fmt::format("{}/s{}-i{}", dir, stages, islands),
                            ClusterToml(Topology(stages, islands)), ATOLL_BIN_DIR));
    }
    for (int round = 0; round < rounds; ++round) {
      for (size_t i = 0; i < n; ++i) {
        PipelineConfig c;
        c.stages = stages;
        c.micro_batches = all_micro_batches[i];
        c.steps = steps;
        c.forward_us = kForwardUs;
        c.backward_us = kBackwardUs;
        const std::string what = fmt::format("S={} M={}", stages, c.micro_batches);
        ATOLL_RETURN_IF_ERROR(
            MeasurePipeline(*clusters[0], c, 1, one[i]).WithContext("one island " + what));
        ATOLL_RETURN_IF_ERROR(
            MeasurePipeline(*clusters[1], c, 2, two[i]).WithContext("two islands " + what));
        ATOLL_RETURN_IF_ERROR(MeasureDataParallel(*clusters[0], c, data_parallel[i])
                                  .WithContext("data parallel " + what));
      }
    }
    for (auto& cluster : clusters) (void)cluster->Stop();
    for (size_t i = 0; i < n; ++i) {
      const int m = all_micro_batches[i];
      // sim devices: modelled compute (see the top of this file), real dataflow.
      const Params params = {{"stages", stages}, {"micro_batches", m}, {"devices", "sim"}};
      const double rows = static_cast<double>(PipelineConfig{}.micro_batch * m);
      AddSeries(result, "pipeline_1island", params, one[i]);
      AddSeries(result, "pipeline_2islands", params, two[i]);
      AddSeries(result, "data_parallel", params, data_parallel[i]);
      result.Add("ideal_bound", params, "examples_per_s", "1/s",
                 {rows / PipelineIdealS(stages, m)});
      const double one_median = Median(one[i].examples_per_s);
      const double two_over_one = Median(two[i].examples_per_s) / one_median;
      const double over_dp = one_median / Median(data_parallel[i].examples_per_s);
      result.Derive(fmt::format("two_islands_over_one_island_S{}_M{}", stages, m), two_over_one);
      result.Derive(fmt::format("pipeline_over_data_parallel_S{}_M{}", stages, m), over_dp);
      fmt::print(
          "S={:2} M={:2}: pipeline {:7.1f} examples/s (efficiency {:.3f}), two islands "
          "{:.3f}x, data parallel {:7.1f} (efficiency {:.3f}), ideal bound {:7.1f}\n",
          stages, m, one_median, Median(one[i].efficiency), two_over_one,
          Median(data_parallel[i].examples_per_s), Median(data_parallel[i].efficiency),
          rows / PipelineIdealS(stages, m));
      std::fflush(stdout);
    }
  }
  result.Derive("forward_us_per_stage_per_micro_batch", kForwardUs);
  result.Derive("backward_us_per_stage_per_micro_batch", kBackwardUs);
  std::filesystem::remove_all(dir);
  return Status::Ok();
}

}  // namespace
}  // namespace atl::bench

int main(int argc, char** argv) {
  return atl::bench::RunBenchmark(
      argc, argv, "pipeline",
      "S-stage pipeline throughput on one and two islands against its bubble bound and "
      "data parallelism (sim devices)",
      atl::bench::RunSweep);
}
