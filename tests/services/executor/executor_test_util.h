// Helpers for the executor's unit tests: an ItemSink that records what it was told, and
// small hand-built functions and entries.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/ir/ir.h"
#include "common/proto/protocol.h"
#include "services/executor/work_item.h"

namespace atl::executor::testutil {

// Records every call, in order. Thread-safe.
class RecordingSink final : public ItemSink {
 public:
  struct Call {
    enum Kind { kDeliver, kReserved, kFail } kind = kDeliver;
    std::shared_ptr<WorkItem> item;
    uint32_t input = 0;           // kDeliver
    std::optional<Tensor> value;  // kDeliver
    Status status;                // kFail
  };

  void Deliver(const std::shared_ptr<WorkItem>& item, uint32_t input, Tensor value) override {
    Record({Call::kDeliver, item, input, std::move(value), {}});
  }
  void Reserved(const std::shared_ptr<WorkItem>& item) override {
    Record({Call::kReserved, item, 0, std::nullopt, {}});
  }
  void Fail(const std::shared_ptr<WorkItem>& item, Status status) override {
    Record({Call::kFail, item, 0, std::nullopt, std::move(status)});
  }

  std::vector<Call> calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }
  // Moves the value of call `i` out (calls() copies it, and a copy of a view owns its bytes).
  std::optional<Tensor> TakeValue(size_t i) {
    std::lock_guard lock(mu_);
    return i < calls_.size() ? std::exchange(calls_[i].value, std::nullopt) : std::nullopt;
  }

 private:
  void Record(Call call) {
    std::lock_guard lock(mu_);
    calls_.push_back(std::move(call));
  }
  mutable std::mutex mu_;
  std::vector<Call> calls_;
};

inline ir::Operand InputOperand(int32_t i) { return {ir::Operand::kInput, i, 0.0}; }
inline ir::Operand OpOperand(int32_t i) { return {ir::Operand::kOp, i, 0.0}; }
inline ir::Operand ScalarOperand(double v) { return {ir::Operand::kScalar, 0, v}; }

// x * factor over one input of type `type`: one input, one output.
inline ir::FunctionDef ScaleFunction(const ir::TensorType& type, double factor = 2.0) {
  ir::FunctionDef fn;
  fn.name = "scale";
  fn.inputs = {type};
  fn.ops = {ir::Op{ir::OpCode::kMul, {InputOperand(0), ScalarOperand(factor)}, 0.0, type}};
  fn.outputs = {OpOperand(0)};
  return fn;
}

// The elements of a replicated f32 [n] above `threshold`: an output of data-dependent shape.
inline ir::FunctionDef FilterFunction(int64_t n, double threshold = 0.0) {
  ir::FunctionDef fn;
  fn.name = "filter";
  fn.inputs = {ir::SplitType(DType::kF32, {n}, -1)};
  fn.ops = {ir::Op{ir::OpCode::kFilter,
                   {InputOperand(0)},
                   threshold,
                   ir::TensorType{DType::kF32, {kDynamicDim}, {-1}}}};
  fn.outputs = {OpOperand(0)};
  return fn;
}

// The all-reduced sum of a replicated f32 [n]: a function with a collective.
inline ir::FunctionDef AllReduceFunction(int64_t n) {
  const ir::TensorType type = ir::SplitType(DType::kF32, {n}, -1);
  ir::FunctionDef fn;
  fn.name = "allreduce";
  fn.inputs = {type};
  fn.ops = {ir::Op{ir::OpCode::kAllReduceSum, {InputOperand(0)}, 0.0, type}};
  fn.outputs = {OpOperand(0)};
  return fn;
}

inline proto::Compile MakeCompile(uint64_t id, ir::FunctionDef fn, uint32_t num_shards,
                                  const std::string& endpoint = "tcp://self:1") {
  return proto::Compile{id, num_shards, std::move(fn),
                        std::vector<std::string>(num_shards, endpoint), 0};
}

// Shard `shard` of function `function_id` on local device `device`, with one tuple input
// and no outputs unless the test adds some.
inline proto::Entry MakeEntry(uint64_t function_id, uint32_t shard, uint32_t num_shards,
                              uint32_t device = 0) {
  proto::Entry e;
  e.run_id = 7;
  e.node = 3;
  e.gang_seq = 1;
  e.function_id = function_id;
  e.device = device;
  e.shard = shard;
  e.num_shards = num_shards;
  e.owner_client = 42;
  e.inputs = {{proto::InputSource::kTuple, 0, 0}};
  e.outputs = {{}};
  return e;
}

inline proto::OutputDest StoreDest(uint64_t object_id, uint32_t shard) {
  proto::OutputDest d;
  d.kind = proto::OutputDest::kStore;
  d.object_id = object_id;
  d.shard = shard;
  return d;
}

inline proto::OutputDest TupleDest(std::string endpoint, uint32_t node, uint32_t input,
                                   uint32_t shard) {
  proto::OutputDest d;
  d.kind = proto::OutputDest::kTuple;
  d.data_endpoint = std::move(endpoint);
  d.node = node;
  d.input = input;
  d.shard = shard;
  return d;
}

// A work item for `entry`, with its inputs missing.
inline std::shared_ptr<WorkItem> MakeItem(proto::Entry entry) {
  auto item = std::make_shared<WorkItem>();
  item->entry = std::move(entry);
  item->inputs.resize(item->entry.inputs.size());
  item->inputs_missing = item->entry.inputs.size();
  return item;
}

}  // namespace atl::executor::testutil
