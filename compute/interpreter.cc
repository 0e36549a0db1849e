#include "compute/interpreter.h"

#include <algorithm>

#include <fmt/format.h>

#include "compute/cancellation.h"
#include "compute/control_flow.h"
#include "compute/fusion.h"

namespace atl::compute {

namespace {

std::string Describe(DType dtype, const Shape& shape) {
  return fmt::format("{}{}", DTypeName(dtype), ShapeString(shape));
}

Status CheckInputs(const ir::FunctionDef& fn, const Shape& mesh,
                   const std::vector<Tensor>& inputs) {
  if (inputs.size() != fn.inputs.size()) {
    return InvalidArgument(fmt::format("function '{}' takes {} inputs, got {}", fn.name,
                                       fn.inputs.size(), inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape want = ir::ShardShape(fn.inputs[i], mesh);
    const Tensor& got = inputs[i];
    if (got.dtype() != fn.inputs[i].dtype || !ir::ShapeFits(want, got.shape())) {
      return InvalidArgument(
          fmt::format("function '{}' input {}: expected local shard {} (global {} over mesh {}), "
                      "got {}",
                      fn.name, i, Describe(fn.inputs[i].dtype, want),
                      Describe(fn.inputs[i].dtype, fn.inputs[i].shape), ShapeString(mesh),
                      Describe(got.dtype(), got.shape())));
    }
  }
  return Status::Ok();
}

// Where an operand's tensor lives: an input, or the result of an op before `before_op`.
// Returns nullptr for a scalar.
Result<Tensor*> Resolve(const ir::Operand& o, std::vector<Tensor>& inputs,
                        std::vector<Tensor>& results, size_t before_op) {
  switch (o.kind) {
    case ir::Operand::kInput:
      if (o.index >= 0 && static_cast<size_t>(o.index) < inputs.size()) return &inputs[o.index];
      return InvalidArgument(
          fmt::format("operand refers to input {} of {}", o.index, inputs.size()));
    case ir::Operand::kOp:
      if (o.index >= 0 && static_cast<size_t>(o.index) < before_op) return &results[o.index];
      return InvalidArgument(fmt::format("operand refers to op {}, which is not earlier", o.index));
    case ir::Operand::kScalar:
      return static_cast<Tensor*>(nullptr);
  }
  return InvalidArgument(fmt::format("operand has unknown kind {}", o.kind));
}

// An op whose params begin with its result's shape, as the backend runs it where the result
// is cut (a broadcast_in_dim into dimensions its attr cuts, a reshape of a cut value): that
// shape made this shard's block, which the backend cannot tell without the mesh.
bool ParamsShapeIsCut(const ir::Op& op) {
  if (op.code == ir::OpCode::kBroadcastInDim) return op.attr != 0;
  return op.code == ir::OpCode::kReshape &&
         std::any_of(op.type.split.begin(), op.type.split.end(), [](int32_t a) { return a >= 0; });
}

ir::Op LocalShapeParams(const ir::Op& op, const Shape& mesh) {
  ir::Op local = op;
  const Shape block = ir::ShardShape(op.type, mesh);
  std::copy(block.begin(), block.end(), local.params.begin());
  return local;
}

// Per op result: the index of the last op that reads it; an output of the function, or a
// result nothing reads, is kept (fn.ops.size()).
std::vector<size_t> LastUses(const ir::FunctionDef& fn) {
  const size_t keep = fn.ops.size();
  std::vector<size_t> last(fn.ops.size(), keep);
  for (size_t i = 0; i < fn.ops.size(); ++i) {
    for (const auto& operand : fn.ops[i].operands) {
      if (operand.kind == ir::Operand::kOp && operand.index >= 0 &&
          static_cast<size_t>(operand.index) < i) {
        last[operand.index] = i;
      }
    }
  }
  for (const auto& o : fn.outputs) {
    if (o.kind == ir::Operand::kOp && o.index >= 0 && static_cast<size_t>(o.index) < keep) {
      last[o.index] = keep;
    }
  }
  return last;
}

// Runs the fused group [first, last] (compute/fusion.h) into results[last], then lets go of
// the values no later op reads.
Status RunGroup(const ir::FunctionDef& fn, const Shape& mesh, size_t first, size_t last,
                std::vector<Tensor>& inputs, std::vector<Tensor>& results,
                const std::vector<size_t>& last_use) {
  auto context = [&] {
    return fmt::format("function '{}' ops {} to {} (fused: {} ... {})", fn.name, first, last,
                       ir::OpName(fn.ops[first].code), ir::OpName(fn.ops[last].code));
  };
  const std::vector<ir::Operand> outside = FusedGroupInputs(fn, first, last);
  std::vector<const Tensor*> tensors;
  for (const ir::Operand& o : outside) {
    auto t = Resolve(o, inputs, results, first);
    if (!t.ok()) return t.status().WithContext(context());
    tensors.push_back(*t);
  }
  auto result = RunFusedGroup(fn, first, last, outside, tensors);
  if (!result.ok()) return result.status().WithContext(context());
  const Shape want = ir::ShardShape(fn.ops[last].type, mesh);
  if (!ir::ShapeFits(want, result->shape())) {
    return InvalidArgument(fmt::format("{}: produced {}, but the function declares local {}",
                                       context(), ShapeString(result->shape()), ShapeString(want)));
  }
  results[last] = std::move(result).value();
  for (size_t i = first; i <= last; ++i) {
    for (const auto& operand : fn.ops[i].operands) {
      if (operand.kind == ir::Operand::kOp && last_use[operand.index] <= last) {
        results[operand.index] = Tensor();
      }
    }
  }
  return Status::Ok();
}

Result<std::vector<Tensor>> RunOnMesh(const ir::FunctionDef& fn, const Shape& mesh, int shard,
                                      std::vector<Tensor> inputs, Backend& backend,
                                      Collectives* collectives,
                                      const std::atomic<bool>* cancelled) {
  ATOLL_RETURN_IF_ERROR(CheckInputs(fn, mesh, inputs));
  const ScopedCancelFlag cancel_scope(cancelled);
  std::vector<Tensor> results(fn.ops.size());
  // The results of structured ops beyond their first, which tuple_element ops read; sized
  // by the first structured op, so that a function without one allocates nothing here.
  std::vector<std::vector<Tensor>> more;
  std::vector<const Tensor*> args;
  const std::vector<size_t> last_use = LastUses(fn);
  // Fused chains are the cpu backend's: another (a simulated one) sees every op.
  const std::vector<size_t> group_end =
      backend.name() == "cpu" ? FusedGroups(fn, last_use) : std::vector<size_t>();
  for (size_t i = 0; i < fn.ops.size(); ++i) {
    if (!group_end.empty() && group_end[i] > i) {
      if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) {
        return Cancelled(fmt::format("function '{}' op {}: cancelled before it ran", fn.name, i));
      }
      ATOLL_RETURN_IF_ERROR(RunGroup(fn, mesh, i, group_end[i], inputs, results, last_use));
      i = group_end[i];
      continue;
    }
    const ir::Op& op = fn.ops[i];
    // Formatted only on error: this loop is on the hot path of every shard.
    auto context = [&] {
      return fmt::format("function '{}' op {} ({}) on {}", fn.name, i, ir::OpName(op.code),
                         backend.name());
    };
    if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) {
      return Cancelled(context() + ": cancelled before it ran");
    }
    args.clear();
    for (const auto& operand : op.operands) {
      auto arg = Resolve(operand, inputs, results, i);
      if (!arg.ok()) return arg.status().WithContext(context());
      args.push_back(*arg);
    }
    Result<Tensor> result = Internal("not run");
    if (ir::IsStructured(op.code)) {
      const BodyRunner run_body = [&](const ir::FunctionDef& body, std::vector<Tensor> in) {
        // Bodies hold no collective (ir::Validate), so none are passed on.
        return RunOnMesh(body, mesh, shard, std::move(in), backend, nullptr, cancelled);
      };
      auto all = RunStructured(fn, op, args, mesh, run_body, cancelled);
      if (!all.ok()) return all.status().WithContext(context());
      result = std::move((*all)[0]);
      more.resize(fn.ops.size());
      more[i] = std::move(all).value();
    } else if (op.code == ir::OpCode::kTupleElement) {
      const size_t of = static_cast<size_t>(op.operands[0].index);
      const size_t k = op.params.empty() ? 0 : static_cast<size_t>(op.params[0]);
      if (k == 0) {
        result = *args[0];
      } else if (of < more.size() && k < more[of].size()) {
        result = more[of][k];
      } else {
        return InvalidArgument(context() + ": no such result");
      }
    } else if (ir::IsCollective(op.code)) {
      if (collectives == nullptr) {
        return FailedPrecondition(context() + ": no collectives for this shard");
      }
      if (args.size() != 1 || args[0] == nullptr) {
        return InvalidArgument(context() + ": takes one tensor");
      }
      result = collectives->Run(static_cast<uint32_t>(i), *args[0]);
    } else if (ParamsShapeIsCut(op)) {
      result = backend.Run(LocalShapeParams(op, mesh), args);
    } else {
      result = backend.Run(op, args);
    }
    if (!result.ok()) return result.status().WithContext(context());
    const Shape want = ir::ShardShape(op.type, mesh);
    if (result->dtype() != op.type.dtype || !ir::ShapeFits(want, result->shape())) {
      return InvalidArgument(fmt::format("{}: produced {}, but the function declares local {}",
                                         context(), Describe(result->dtype(), result->shape()),
                                         Describe(op.type.dtype, want)));
    }
    results[i] = std::move(result).value();
    // A value no later op reads goes now, so that the next op's buffer can reuse its memory
    // (a chain of elementwise ops then touches a few buffers, not one per op).
    for (const auto& operand : op.operands) {
      if (operand.kind == ir::Operand::kOp && last_use[operand.index] == i) {
        results[operand.index] = Tensor();
      }
    }
  }

  // Outputs are copied, except the last use of each value, which is moved.
  std::vector<int> input_uses(inputs.size());
  std::vector<int> op_uses(results.size());
  for (const auto& o : fn.outputs) {
    if (o.kind == ir::Operand::kInput && o.index >= 0 &&
        static_cast<size_t>(o.index) < inputs.size()) {
      ++input_uses[o.index];
    } else if (o.kind == ir::Operand::kOp && o.index >= 0 &&
               static_cast<size_t>(o.index) < results.size()) {
      ++op_uses[o.index];
    }
  }
  std::vector<Tensor> outputs;
  outputs.reserve(fn.outputs.size());
  for (size_t i = 0; i < fn.outputs.size(); ++i) {
    const ir::Operand& o = fn.outputs[i];
    auto context = [&] { return fmt::format("function '{}' output {}", fn.name, i); };
    auto value = Resolve(o, inputs, results, results.size());
    if (!value.ok()) return value.status().WithContext(context());
    if (*value == nullptr) return InvalidArgument(context() + " is a scalar");
    int& uses = o.kind == ir::Operand::kInput ? input_uses[o.index] : op_uses[o.index];
    if (--uses == 0) {
      outputs.push_back(std::move(**value));
    } else {
      outputs.push_back(**value);
    }
  }
  return outputs;
}

}  // namespace

Result<std::vector<Tensor>> RunFunction(const ir::FunctionDef& fn, int shard, int num_shards,
                                        std::vector<Tensor> inputs, Backend& backend,
                                        Collectives* collectives,
                                        const std::atomic<bool>* cancelled) {
  if (num_shards <= 0 || shard < 0 || shard >= num_shards) {
    return InvalidArgument(
        fmt::format("function '{}': shard {} of {} does not exist", fn.name, shard, num_shards));
  }
  return RunOnMesh(fn, ir::MeshOf(fn, num_shards), shard, std::move(inputs), backend, collectives,
                   cancelled);
}

}  // namespace atl::compute
