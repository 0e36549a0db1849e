// Lowering: turns a traced program into what the cluster runs. Virtual devices become
// physical ones (from each function's slice), every call becomes one gang of per-shard
// entries, every edge a set of shard-to-shard transfers tagged with the destination
// shard, every argument a set of object-store puts (or, when small, values carried by the
// entries themselves), every result a set of object-store shards to read back.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "client/internal.h"

namespace atl {

// An argument shard of at most this many bytes travels inside the submission, to the
// executor that reads it, instead of through the object store: no put precedes the run.
constexpr size_t kInlineArgumentBytes = 16 * 1024;

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
  // >= 0: the argument, a future, that is returned as is: the shards are an earlier run's.
  int borrowed_arg = -1;
};

// An object a run made and must release: once per store that holds shards of it, with how
// many shards it holds there (the store frees it once all of them are sealed).
struct OwnedObject {
  std::string store;
  uint64_t object_id = 0;
  uint32_t shards = 0;
  bool operator==(const OwnedObject&) const = default;
};

// A program argument as lowering sees it: a value to put, or an earlier run's result
// (already in the object stores, where `plan` says).
struct LoweringArg {
  const Tensor* value = nullptr;
  const ResultPlan* plan = nullptr;
};

struct LoweredRun {
  // By scheduler endpoint. A run that reads futures asks each for RunDone (notify_done).
  std::map<std::string, proto::SubmitProgram> per_scheduler;
  std::vector<ArgumentPut> puts;
  std::vector<ResultPlan> results;
};

// The objects `run` owns: its arguments' puts and its results not borrowed from earlier
// runs, each (store, object) once however many of its shards that store holds.
std::vector<OwnedObject> OwnedObjects(const LoweredRun& run);

// `next_object_id` hands out fresh object ids (unique per client).
Result<LoweredRun> Lower(const Program::Impl& program, const std::vector<LoweringArg>& args,
                         uint64_t client_id, uint64_t run_id, const SubmitOptions& options,
                         double weight, const std::function<uint64_t()>& next_object_id);

}  // namespace atl
