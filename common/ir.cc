#include "common/ir.h"

#include <fmt/format.h>

namespace atl::ir {

std::string_view OpName(OpCode code) {
  switch (code) {
    case OpCode::kAdd:
      return "add";
    case OpCode::kSub:
      return "sub";
    case OpCode::kMul:
      return "mul";
    case OpCode::kDiv:
      return "div";
    case OpCode::kMatmul:
      return "matmul";
    case OpCode::kSpin:
      return "spin";
    case OpCode::kAllReduceSum:
      return "all_reduce_sum";
    case OpCode::kFilter:
      return "filter";
  }
  return "?";
}

bool HasCollectives(const FunctionDef& fn) {
  for (const auto& op : fn.ops) {
    if (op.code == OpCode::kAllReduceSum) return true;
  }
  return false;
}

bool IsStatic(const TensorType& type) {
  for (int64_t d : type.shape) {
    if (d == kDynamicDim) return false;
  }
  return true;
}

bool ShapeFits(const Shape& declared, const Shape& actual) {
  if (declared.size() != actual.size()) return false;
  for (size_t i = 0; i < declared.size(); ++i) {
    if (declared[i] != kDynamicDim && declared[i] != actual[i]) return false;
  }
  return true;
}

bool IsIrregular(const FunctionDef& fn) {
  for (const auto& t : fn.inputs) {
    if (!IsStatic(t)) return true;
  }
  for (const auto& t : OutputTypes(fn)) {
    if (!IsStatic(t)) return true;
  }
  return false;
}

const TensorType* OperandType(const FunctionDef& fn, const Operand& operand) {
  switch (operand.kind) {
    case Operand::kInput:
      if (operand.index >= 0 && static_cast<size_t>(operand.index) < fn.inputs.size()) {
        return &fn.inputs[operand.index];
      }
      return nullptr;
    case Operand::kOp:
      if (operand.index >= 0 && static_cast<size_t>(operand.index) < fn.ops.size()) {
        return &fn.ops[operand.index].type;
      }
      return nullptr;
    default:
      return nullptr;
  }
}

std::vector<TensorType> OutputTypes(const FunctionDef& fn) {
  std::vector<TensorType> out;
  for (const auto& o : fn.outputs) {
    const TensorType* t = OperandType(fn, o);
    out.push_back(t ? *t : TensorType{});
  }
  return out;
}

Shape ShardShape(const TensorType& type, int num_shards) {
  Shape s = type.shape;
  if (type.split_dim >= 0 && static_cast<size_t>(type.split_dim) < s.size() && num_shards > 0 &&
      s[type.split_dim] != kDynamicDim) {
    s[type.split_dim] /= num_shards;
  }
  return s;
}

namespace {

Status CheckType(const std::string& what, const TensorType& t, int num_shards) {
  for (auto d : t.shape) {
    if (d <= 0 && d != kDynamicDim)
      return InvalidArgument(what + " has a non-positive dimension " + ShapeString(t.shape));
  }
  if (t.split_dim >= static_cast<int32_t>(t.shape.size())) {
    return InvalidArgument(fmt::format("{} splits dimension {} of a rank-{} tensor", what,
                                       t.split_dim, t.shape.size()));
  }
  if (t.split_dim >= 0 && t.shape[t.split_dim] != kDynamicDim &&
      t.shape[t.split_dim] % num_shards != 0) {
    return InvalidArgument(fmt::format("{} {}: dimension {} ({}) does not divide over {} devices",
                                       what, ShapeString(t.shape), t.split_dim,
                                       t.shape[t.split_dim], num_shards));
  }
  return Status::Ok();
}

Status CheckOperand(const FunctionDef& fn, const Operand& o, size_t before_op) {
  if (o.kind == Operand::kScalar) return Status::Ok();
  if (o.kind == Operand::kOp && static_cast<size_t>(o.index) >= before_op) {
    return InvalidArgument(fmt::format("operand refers to op {} which is not earlier", o.index));
  }
  if (OperandType(fn, o) == nullptr) {
    return InvalidArgument(
        fmt::format("operand (kind {}, index {}) does not exist", o.kind, o.index));
  }
  return Status::Ok();
}

}  // namespace

Result<TensorType> InferType(const FunctionDef& fn, const Op& op) {
  auto type_of = [&](size_t i) { return OperandType(fn, op.operands[i]); };
  switch (op.code) {
    case OpCode::kAdd:
    case OpCode::kSub:
    case OpCode::kMul:
    case OpCode::kDiv: {
      if (op.operands.size() != 2) return InvalidArgument("elementwise ops take two operands");
      const TensorType* a = type_of(0);
      const TensorType* b = type_of(1);
      if (!a && !b) return InvalidArgument("elementwise op on two scalars");
      if (a && b && !(*a == *b)) {
        return InvalidArgument(
            fmt::format("{}: operand types differ: {}{} split {} vs {}{} split {}", OpName(op.code),
                        DTypeName(a->dtype), ShapeString(a->shape), a->split_dim,
                        DTypeName(b->dtype), ShapeString(b->shape), b->split_dim));
      }
      return a ? *a : *b;
    }
    case OpCode::kMatmul: {
      if (op.operands.size() != 2) return InvalidArgument("matmul takes two operands");
      const TensorType* a = type_of(0);
      const TensorType* b = type_of(1);
      if (!a || !b) return InvalidArgument("matmul operands must be tensors");
      if (!IsStatic(*a) || !IsStatic(*b)) {
        return InvalidArgument("matmul needs operands of static shape");
      }
      if (a->shape.size() != 2 || b->shape.size() != 2 || a->shape[1] != b->shape[0]) {
        return InvalidArgument("matmul needs [m,k] x [k,n], got " + ShapeString(a->shape) + " x " +
                               ShapeString(b->shape));
      }
      if (a->dtype != DType::kF32 || b->dtype != DType::kF32) {
        return InvalidArgument("matmul is f32 only");
      }
      if (a->split_dim > 0 || b->split_dim >= 0) {
        return InvalidArgument(
            "matmul shards only the rows of its left operand; the right one "
            "must be replicated");
      }
      return TensorType{DType::kF32, {a->shape[0], b->shape[1]}, a->split_dim};
    }
    case OpCode::kSpin: {
      if (op.operands.size() != 1 || !type_of(0)) return InvalidArgument("spin takes one tensor");
      if (op.attr < 0) return InvalidArgument("spin time must be >= 0 us");
      return *type_of(0);
    }
    case OpCode::kAllReduceSum: {
      if (op.operands.size() != 1 || !type_of(0)) {
        return InvalidArgument("all_reduce_sum takes one tensor");
      }
      if (type_of(0)->split_dim >= 0) {
        return InvalidArgument(
            "all_reduce_sum takes a replicated tensor (each device's partial "
            "value), not a split one");
      }
      if (!IsStatic(*type_of(0))) {
        return InvalidArgument(
            "all_reduce_sum needs a static shape: every device's partial must have the same "
            "size");
      }
      return *type_of(0);
    }
    case OpCode::kFilter: {
      if (op.operands.size() != 1 || !type_of(0) || type_of(0)->shape.size() != 1) {
        return InvalidArgument("filter takes one 1-D tensor");
      }
      TensorType out = *type_of(0);
      out.shape = {kDynamicDim};
      return out;
    }
  }
  return InvalidArgument("unknown op code");
}

Status Validate(const FunctionDef& fn, int num_shards) {
  if (num_shards <= 0) return InvalidArgument("a function needs at least one device");
  if (fn.outputs.empty()) return InvalidArgument("function '" + fn.name + "' has no outputs");
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    ATOLL_RETURN_IF_ERROR(CheckType(fmt::format("input {}", i), fn.inputs[i], num_shards));
  }
  for (size_t i = 0; i < fn.ops.size(); ++i) {
    const Op& op = fn.ops[i];
    for (const auto& o : op.operands) {
      ATOLL_RETURN_IF_ERROR(CheckOperand(fn, o, i).WithContext(fmt::format("op {}", i)));
    }
    ATOLL_ASSIGN_OR_RETURN(TensorType want, InferType(fn, op));
    if (!(want == op.type)) return InvalidArgument(fmt::format("op {}: result type is wrong", i));
  }
  for (const auto& o : fn.outputs) {
    if (o.kind == Operand::kScalar) return InvalidArgument("an output cannot be a scalar");
    ATOLL_RETURN_IF_ERROR(CheckOperand(fn, o, fn.ops.size()).WithContext("output"));
  }
  return Status::Ok();
}

}  // namespace atl::ir
