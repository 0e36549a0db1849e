#include "common/ir_model_ops.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace atl::ir::internal {

namespace {

// "f32[8,4] split [0,-1]", for error messages.
std::string Describe(const TensorType& t) {
  return fmt::format("{}{} split [{}]", DTypeName(t.dtype), ShapeString(t.shape),
                     fmt::join(t.split, ","));
}

// The op's operands as `n` tensors of static shape; an error naming the op otherwise.
Result<std::vector<const TensorType*>> Tensors(const FunctionDef& fn, const Op& op, size_t n) {
  if (op.operands.size() != n) {
    return InvalidArgument(
        fmt::format("{} takes {} operands, got {}", OpName(op.code), n, op.operands.size()));
  }
  std::vector<const TensorType*> types;
  for (const auto& o : op.operands) {
    const TensorType* t = OperandType(fn, o);
    if (t == nullptr)
      return InvalidArgument(fmt::format("{} operands must be tensors", OpName(op.code)));
    if (!IsStatic(*t)) {
      return InvalidArgument(
          fmt::format("{} needs operands of static shape, got {}", OpName(op.code), Describe(*t)));
    }
    types.push_back(t);
  }
  return types;
}

Status NeedF32(const Op& op, const TensorType& t) {
  if (t.dtype == DType::kF32) return Status::Ok();
  return InvalidArgument(fmt::format("{} is f32 only, got {}", OpName(op.code), Describe(t)));
}

// The last dimension is where softmax, layer norm and cross-entropy compute row statistics:
// a row must be whole on every device.
Status NeedWholeRows(const Op& op, const TensorType& t) {
  if (t.shape.empty()) {
    return InvalidArgument(fmt::format("{} needs rank >= 1, got {}", OpName(op.code), Describe(t)));
  }
  if (t.split.back() >= 0) {
    return InvalidArgument(fmt::format(
        "{} computes over the last dimension, which must not be cut over devices: got {}",
        OpName(op.code), Describe(t)));
  }
  return Status::Ok();
}

// A per-feature parameter of a row-wise op: f32 [d], replicated.
Status NeedFeatureParam(const Op& op, const TensorType& p, int64_t d, std::string_view what) {
  if (p.dtype != DType::kF32 || p.shape != Shape{d} || !IsReplicated(p)) {
    return InvalidArgument(fmt::format("{}: {} must be replicated f32[{}], got {}", OpName(op.code),
                                       what, d, Describe(p)));
  }
  return Status::Ok();
}

Status NeedSameType(const Op& op, const TensorType& a, const TensorType& b) {
  if (a == b) return Status::Ok();
  return InvalidArgument(
      fmt::format("{}: operand types differ: {} vs {}", OpName(op.code), Describe(a), Describe(b)));
}

Status NeedPositiveAttr(const Op& op, std::string_view what) {
  if (std::isfinite(op.attr) && op.attr > 0) return Status::Ok();
  return InvalidArgument(fmt::format("{}: {} must be > 0, got {}", OpName(op.code), what, op.attr));
}

Result<TensorType> InferLayerNormGrad(const Op& op, const std::vector<const TensorType*>& t) {
  const TensorType& dy = *t[0];
  const TensorType& x = *t[1];
  ATOLL_RETURN_IF_ERROR(NeedF32(op, x));
  ATOLL_RETURN_IF_ERROR(NeedSameType(op, dy, x));
  ATOLL_RETURN_IF_ERROR(NeedWholeRows(op, x));
  ATOLL_RETURN_IF_ERROR(NeedFeatureParam(op, *t[2], x.shape.back(), "gamma"));
  ATOLL_RETURN_IF_ERROR(NeedPositiveAttr(op, "epsilon"));
  if (op.code == OpCode::kLayerNormGradX) return x;
  return TensorType{DType::kF32, {x.shape.back()}, {-1}};  // partial when x's rows are cut
}

Result<TensorType> InferCrossEntropy(const Op& op, const std::vector<const TensorType*>& t) {
  const TensorType& logits = *t[0];
  const TensorType& labels = *t[1];
  ATOLL_RETURN_IF_ERROR(NeedF32(op, logits));
  if (logits.shape.size() != 2 || labels.dtype != DType::kI32 ||
      labels.shape != Shape{logits.shape[0]}) {
    return InvalidArgument(fmt::format("{} needs logits f32[b,c] and labels i32[b], got {} and {}",
                                       OpName(op.code), Describe(logits), Describe(labels)));
  }
  ATOLL_RETURN_IF_ERROR(NeedWholeRows(op, logits));
  if (labels.split[0] != logits.split[0]) {
    return InvalidArgument(
        fmt::format("{}: labels must be cut like the logits' rows, got {} and {}", OpName(op.code),
                    Describe(logits), Describe(labels)));
  }
  if (op.code == OpCode::kCrossEntropyGrad) return logits;
  if (op.attr != static_cast<double>(logits.shape[0])) {
    return InvalidArgument(fmt::format("{}: attr must be the global batch {}, got {}",
                                       OpName(op.code), logits.shape[0], op.attr));
  }
  return TensorType{DType::kF32, {}, {}};  // partial when the rows are cut
}

}  // namespace

Result<TensorType> InferMatmul(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2));
  const TensorType& a = *t[0];
  const TensorType& b = *t[1];
  if (op.attr != 0 && op.attr != 1 && op.attr != 2 && op.attr != 3) {
    return InvalidArgument(
        fmt::format("matmul attr must be transpose_a + 2 * transpose_b, got {}", op.attr));
  }
  const int am = MatmulTransposeA(op.attr) ? 1 : 0;  // a's dimension of m; 1 - am is k
  const int bn = MatmulTransposeB(op.attr) ? 0 : 1;  // b's dimension of n; 1 - bn is k
  if (a.shape.size() != 2 || b.shape.size() != 2 || a.shape[1 - am] != b.shape[1 - bn]) {
    return InvalidArgument(
        fmt::format("matmul needs op(a) x op(b) to be [m,k] x [k,n] (transposes {}), "
                    "got {} x {}",
                    op.attr, ShapeString(a.shape), ShapeString(b.shape)));
  }
  if (a.dtype != DType::kF32 || b.dtype != DType::kF32) {
    return InvalidArgument("matmul is f32 only, got " + Describe(a) + " x " + Describe(b));
  }
  const int32_t m_axis = a.split[am];
  const int32_t n_axis = b.split[bn];
  if (a.split[1 - am] != b.split[1 - bn] || (m_axis >= 0 && m_axis == n_axis)) {
    return InvalidArgument(fmt::format(
        "matmul accepts the rows of op(a) and the columns of op(b) cut along different mesh "
        "axes, and the contracted dimension cut alike in both (each device's partial sum) or "
        "replicated in both; got {} x {} (transposes {})",
        Describe(a), Describe(b), op.attr));
  }
  return TensorType{DType::kF32, {a.shape[am], b.shape[bn]}, {m_axis, n_axis}};
}

Result<TensorType> InferModelOp(const FunctionDef& fn, const Op& op) {
  switch (op.code) {
    case OpCode::kExp:
    case OpCode::kLog:
    case OpCode::kTanh:
    case OpCode::kRelu:
    case OpCode::kNeg:
    case OpCode::kSqrt:
    case OpCode::kRsqrt:
    case OpCode::kGelu: {
      ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
      ATOLL_RETURN_IF_ERROR(NeedF32(op, *t[0]));
      return *t[0];
    }
    case OpCode::kGeluGrad:
    case OpCode::kSgdUpdate: {
      ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2));
      ATOLL_RETURN_IF_ERROR(NeedF32(op, *t[0]));
      ATOLL_RETURN_IF_ERROR(NeedSameType(op, *t[0], *t[1]));
      if (op.code == OpCode::kSgdUpdate && !(std::isfinite(op.attr) && op.attr >= 0)) {
        return InvalidArgument(
            fmt::format("sgd_update: learning rate must be >= 0, got {}", op.attr));
      }
      return *t[0];
    }
    case OpCode::kBiasAdd: {
      ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2));
      const TensorType& x = *t[0];
      const TensorType& bias = *t[1];
      ATOLL_RETURN_IF_ERROR(NeedF32(op, x));
      if (x.shape.empty() || bias.dtype != DType::kF32 || bias.shape != Shape{x.shape.back()} ||
          bias.split[0] != x.split.back()) {
        return InvalidArgument(
            fmt::format("bias_add needs x f32[...,n] and bias f32[n] cut like x's last dimension, "
                        "got {} and {}",
                        Describe(x), Describe(bias)));
      }
      return x;
    }
    case OpCode::kReduceSum: {
      ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
      TensorType out = *t[0];
      ATOLL_RETURN_IF_ERROR(NeedF32(op, out));
      const auto axis = static_cast<int64_t>(op.attr);
      if (static_cast<double>(axis) != op.attr || axis < 0 ||
          axis >= static_cast<int64_t>(out.shape.size())) {
        return InvalidArgument(
            fmt::format("reduce_sum over dimension {} of {}", op.attr, Describe(out)));
      }
      out.shape.erase(out.shape.begin() + axis);
      out.split.erase(out.split.begin() + axis);  // a cut axis: partial
      return out;
    }
    case OpCode::kSoftmax: {
      ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
      ATOLL_RETURN_IF_ERROR(NeedF32(op, *t[0]));
      ATOLL_RETURN_IF_ERROR(NeedWholeRows(op, *t[0]));
      return *t[0];
    }
    case OpCode::kLayerNorm: {
      ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 3));
      const TensorType& x = *t[0];
      ATOLL_RETURN_IF_ERROR(NeedF32(op, x));
      ATOLL_RETURN_IF_ERROR(NeedWholeRows(op, x));
      ATOLL_RETURN_IF_ERROR(NeedFeatureParam(op, *t[1], x.shape.back(), "gamma"));
      ATOLL_RETURN_IF_ERROR(NeedFeatureParam(op, *t[2], x.shape.back(), "beta"));
      ATOLL_RETURN_IF_ERROR(NeedPositiveAttr(op, "epsilon"));
      return x;
    }
    case OpCode::kLayerNormGradX:
    case OpCode::kLayerNormGradGamma:
    case OpCode::kLayerNormGradBeta: {
      ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 3));
      return InferLayerNormGrad(op, t);
    }
    case OpCode::kCrossEntropyLoss:
    case OpCode::kCrossEntropyGrad: {
      ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2));
      return InferCrossEntropy(op, t);
    }
    case OpCode::kTranspose: {
      ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
      const TensorType& x = *t[0];
      if (x.shape.size() != 2) {
        return InvalidArgument("transpose needs a matrix, got " + Describe(x));
      }
      return TensorType{x.dtype, {x.shape[1], x.shape[0]}, {x.split[1], x.split[0]}};
    }
    default:
      return InvalidArgument(fmt::format("unknown op code {}", static_cast<int>(op.code)));
  }
}

}  // namespace atl::ir::internal
