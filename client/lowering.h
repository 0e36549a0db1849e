// Lowering: turns a traced program into what the cluster runs. Virtual devices become
// physical ones (from each function's slice), every call becomes one gang of per-shard
// entries, every edge a set of shard-to-shard transfers tagged with the destination
// shard, every argument a set of object-store puts, every result a set of object-store
// shards to read back.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "client/internal.h"

namespace atl {

struct ArgumentPut {
  std::string store;  // the object store of the consuming device's host
  uint64_t object_id = 0;
  uint32_t shard = 0;
  Tensor value;
};

struct ResultShard {
  std::string store;
  uint64_t object_id = 0;
  uint32_t shard = 0;
};

struct ResultPlan {
  ir::TensorType type;  // global type; with `mesh`, says how to assemble
  Shape mesh;
  std::vector<ResultShard> shards;  // empty when the result is an argument itself
  int arg_index = -1;
  bool borrowed = false;  // the shards belong to an earlier run (a future returned as is)
};

// A program argument as lowering sees it: a value to put, or an earlier run's result
// (already in the object stores, where `plan` says).
struct LoweringArg {
  const Tensor* value = nullptr;
  const ResultPlan* plan = nullptr;
};

struct LoweredRun {
  std::map<std::string, proto::SubmitProgram> per_scheduler;  // by scheduler endpoint
  std::vector<ArgumentPut> puts;
  std::vector<ResultPlan> results;
};

// `next_object_id` hands out fresh object ids (unique per client).
Result<LoweredRun> Lower(const Program::Impl& program, const std::vector<LoweringArg>& args,
                         uint64_t client_id, uint64_t run_id, const SubmitOptions& options,
                         double weight, const std::function<uint64_t()>& next_object_id);

}  // namespace atl
