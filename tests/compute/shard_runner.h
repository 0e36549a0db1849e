// Runs a function on every shard of a 1-D mesh at once, one thread per shard, the shards
// meeting in their collectives in memory: a gang as the executors run it, without a cluster.
#pragma once

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "compute/interpreter.h"
#include "services/executor/collective_hub.h"
#include "tests/kernels/shards.h"

namespace atl::testutil {

// The collectives of one gang of `shards` shards of a 1-D mesh, all on one host: its
// CollectiveHub computes every collective as an executor's does (waiting up to 10 s for the
// shards), and sends nothing, there being no other host.
class MemoryGang {
 public:
  MemoryGang(const ir::FunctionDef& fn, int shards)
      : fn_(fn),
        layout_(std::vector<std::string>(shards, kHost)),
        hub_(
            kHost, [](auto&&...) {}, std::chrono::seconds(10)) {}

  // Shard `shard`'s view, for compute::RunFunction.
  class Member final : public compute::Collectives {
   public:
    Member(MemoryGang& gang, int shard) : gang_(gang), shard_(shard) {}
    Result<Tensor> Run(uint32_t op_index, Tensor local) override {
      const Shape mesh = {static_cast<int64_t>(gang_.layout_.shard_endpoints.size())};
      ATOLL_ASSIGN_OR_RETURN(const executor::CollectiveOp op,
                             executor::CollectiveOp::Of(gang_.fn_, op_index, mesh));
      return gang_.hub_.Run({0, 0, op_index}, gang_.layout_, op, static_cast<uint32_t>(shard_),
                            std::move(local));
    }

   private:
    MemoryGang& gang_;
    int shard_;
  };

 private:
  static constexpr const char* kHost = "inproc://gang";
  const ir::FunctionDef& fn_;
  const executor::GangLayout layout_;
  executor::CollectiveHub hub_;
};

// `fn` on shards 0..n-1 of a 1-D mesh (n = inputs.size()), shard s given inputs[s]: each
// shard's outputs, or the first shard's error.
inline Result<std::vector<std::vector<Tensor>>> RunOnShards(
    const ir::FunctionDef& fn, std::vector<std::vector<Tensor>> inputs) {
  const int n = static_cast<int>(inputs.size());
  MemoryGang gang(fn, n);
  std::vector<Result<std::vector<Tensor>>> outs(n, Internal("not run"));
  std::vector<std::thread> threads;
  for (int s = 0; s < n; ++s) {
    threads.emplace_back([&, s] {
      MemoryGang::Member member(gang, s);
      outs[s] =
          compute::RunFunction(fn, s, n, std::move(inputs[s]), compute::CpuBackend::Get(), &member);
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<std::vector<Tensor>> per_shard;
  for (int s = 0; s < n; ++s) {
    if (!outs[s].ok()) return outs[s].status().WithContext(fmt::format("shard {}", s));
    per_shard.push_back(std::move(outs[s]).value());
  }
  return per_shard;
}

// `fn` on `shards` shards of a 1-D mesh, given global inputs (cut as fn's inputs say) and
// giving global outputs: split ones put back together, replicated ones taken from shard 0
// once every shard agrees bit for bit (a partial output differs: FailedPrecondition).
inline Result<std::vector<Tensor>> RunGlobal(const ir::FunctionDef& fn, int shards,
                                             const std::vector<Tensor>& globals) {
  std::vector<std::vector<Tensor>> inputs(shards);
  for (int s = 0; s < shards; ++s) {
    for (size_t i = 0; i < globals.size() && i < fn.inputs.size(); ++i) {
      inputs[s].push_back(ShardOf(globals[i], SplitDim(fn.inputs[i]), s, shards));
    }
  }
  ATOLL_ASSIGN_OR_RETURN(auto per_shard, RunOnShards(fn, std::move(inputs)));
  const std::vector<ir::TensorType> types = ir::OutputTypes(fn);
  std::vector<Tensor> outputs;
  for (size_t o = 0; o < types.size(); ++o) {
    std::vector<Tensor> parts;
    for (int s = 0; s < shards; ++s) parts.push_back(per_shard[s][o]);
    const int32_t dim = SplitDim(types[o]);
    if (dim >= 0) {
      outputs.push_back(Assemble(parts, dim, types[o].shape));
      continue;
    }
    for (int s = 1; s < shards; ++s) {
      if (!(parts[s] == parts[0])) {
        return FailedPrecondition(
            fmt::format("output {} is replicated, but shards 0 and {} differ", o, s));
      }
    }
    outputs.push_back(parts[0]);
  }
  return outputs;
}

}  // namespace atl::testutil
