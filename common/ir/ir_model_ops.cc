#include "common/ir/ir_model_ops.h"

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

// Which dimensions of an op's operands may be dynamic (kDynamicDim).
enum class Dims {
  kStatic,       // none
  kDynamicRows,  // dimension 0: rows routed to a device, computed on row by row
};

bool Fits(const TensorType& t, Dims dims) {
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (t.shape[d] == kDynamicDim && !(d == 0 && dims == Dims::kDynamicRows)) return false;
  }
  return true;
}

// The op's operands as `n` tensors followed by `scalars` scalar constants, the tensors'
// shapes as `dims` allows; an error naming the op otherwise.
Result<std::vector<const TensorType*>> Tensors(const FunctionDef& fn, const Op& op, size_t n,
                                               Dims dims = Dims::kStatic, size_t scalars = 0) {
  if (op.operands.size() != n + scalars) {
    return InvalidArgument(fmt::format("{} takes {} operands, got {}", OpName(op.code), n + scalars,
                                       op.operands.size()));
  }
  std::vector<const TensorType*> types;
  for (size_t i = 0; i < n; ++i) {
    const TensorType* t = OperandType(fn, op.operands[i]);
    if (t == nullptr) {
      return InvalidArgument(
          fmt::format("{}: operand {} is not a tensor (operands 0 to {} must be tensors)",
                      OpName(op.code), i, n - 1));
    }
    if (!Fits(*t, dims)) {
      return InvalidArgument(fmt::format(
          "{} needs operands of static shape{}, got {}", OpName(op.code),
          dims == Dims::kDynamicRows ? " (but for a dynamic dimension 0)" : "", Describe(*t)));
    }
    types.push_back(t);
  }
  for (size_t i = n; i < n + scalars; ++i) {
    if (op.operands[i].kind != Operand::kScalar) {
      return InvalidArgument(fmt::format("{} operand {} must be a scalar", OpName(op.code), i));
    }
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

// kAdamParam/M/V: see ir.h. The hyper-parameters are checked here so that a bad one is
// refused when the function is built, not on every step.
Result<TensorType> InferAdam(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 5, Dims::kStatic, 5));
  ATOLL_RETURN_IF_ERROR(NeedF32(op, *t[0]));
  for (size_t i = 1; i < 4; ++i) ATOLL_RETURN_IF_ERROR(NeedSameType(op, *t[0], *t[i]));
  const TensorType& step = *t[4];
  if (step.dtype != DType::kI32 || !step.shape.empty()) {
    return InvalidArgument(fmt::format("{}: step must be a replicated i32[], got {}",
                                       OpName(op.code), Describe(step)));
  }
  auto scalar = [&](size_t i) { return op.operands[i].scalar; };
  const double lr = scalar(5), beta1 = scalar(6), beta2 = scalar(7), eps = scalar(8),
               decay = scalar(9);
  const bool ok = std::isfinite(lr) && lr >= 0 && beta1 >= 0 && beta1 < 1 && beta2 >= 0 &&
                  beta2 < 1 && std::isfinite(eps) && eps > 0 && std::isfinite(decay) && decay >= 0;
  if (!ok) {
    return InvalidArgument(fmt::format(
        "{}: needs learning rate >= 0, betas in [0, 1), epsilon > 0, weight decay >= 0; got "
        "{}, {}, {}, {}, {}",
        OpName(op.code), lr, beta1, beta2, eps, decay));
  }
  return *t[0];
}

// Rows [m,k] that a grouped op splits by device: f32, cut along some mesh axis (the
// experts' axis), the columns whole.
Result<int32_t> NeedGroupedRows(const Op& op, const TensorType& x, std::string_view what) {
  ATOLL_RETURN_IF_ERROR(NeedF32(op, x));
  if (x.shape.size() != 2 || x.split[0] < 0 || x.split[1] >= 0) {
    return InvalidArgument(
        fmt::format("{}: {} must be f32[m,k] with the rows cut along a mesh axis and the "
                    "columns whole, got {}",
                    OpName(op.code), what, Describe(x)));
  }
  return x.split[0];
}

Result<TensorType> InferGroupedMatmul(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2, Dims::kDynamicRows));
  const TensorType& x = *t[0];
  const TensorType& w = *t[1];
  ATOLL_ASSIGN_OR_RETURN(const int32_t axis, NeedGroupedRows(op, x, "x"));
  if (op.attr != 0 && op.attr != 1) {
    return InvalidArgument(
        fmt::format("{}: attr must be 0 or 1 (transpose w), got {}", OpName(op.code), op.attr));
  }
  const int k_dim = op.attr == 1 ? 2 : 1;  // w's dimension that x's columns meet
  if (w.dtype != DType::kF32 || w.shape.size() != 3 || !IsStatic(w) ||
      w.split != std::vector<int32_t>{axis, -1, -1} || w.shape[k_dim] != x.shape[1]) {
    return InvalidArgument(
        fmt::format("{}: w must be f32[G,{},n]{} with G cut along x's row axis {}, got {} for x {}",
                    OpName(op.code), x.shape[1], op.attr == 1 ? " transposed ([G,n,k])" : "", axis,
                    Describe(w), Describe(x)));
  }
  return TensorType{DType::kF32, {x.shape[0], w.shape[3 - k_dim]}, {axis, -1}};
}

Result<TensorType> InferGroupedWeightGrad(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2, Dims::kDynamicRows));
  ATOLL_ASSIGN_OR_RETURN(const int32_t axis, NeedGroupedRows(op, *t[0], "x"));
  ATOLL_ASSIGN_OR_RETURN(const int32_t dy_axis, NeedGroupedRows(op, *t[1], "dy"));
  if (axis != dy_axis || t[0]->shape[0] != t[1]->shape[0]) {
    return InvalidArgument(fmt::format("{}: x and dy need the same rows, cut alike; got {} and {}",
                                       OpName(op.code), Describe(*t[0]), Describe(*t[1])));
  }
  const auto groups = static_cast<int64_t>(op.attr);
  if (static_cast<double>(groups) != op.attr || groups < 1) {
    return InvalidArgument(
        fmt::format("{}: attr must be the group count G >= 1, got {}", OpName(op.code), op.attr));
  }
  return TensorType{DType::kF32, {groups, t[0]->shape[1], t[1]->shape[1]}, {axis, -1, -1}};
}

// Row ids i32 [m] cut like the rows they index (`rows_axis`, -1: not cut).
Status NeedRowIds(const Op& op, const TensorType& ids, int64_t m, int32_t rows_axis) {
  if (ids.dtype == DType::kI32 && ids.shape == Shape{m} && ids.split[0] == rows_axis) {
    return Status::Ok();
  }
  return InvalidArgument(fmt::format("{}: ids must be i32[{}] cut like the rows, got {}",
                                     OpName(op.code), m == kDynamicDim ? "?" : fmt::to_string(m),
                                     Describe(ids)));
}

Result<TensorType> InferScatterAddRows(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2, Dims::kDynamicRows));
  const TensorType& v = *t[0];
  ATOLL_RETURN_IF_ERROR(NeedF32(op, v));
  if (v.shape.size() != 2 || v.split[1] >= 0) {
    return InvalidArgument(fmt::format("{}: values must be f32[m,d] with whole rows, got {}",
                                       OpName(op.code), Describe(v)));
  }
  ATOLL_RETURN_IF_ERROR(NeedRowIds(op, *t[1], v.shape[0], v.split[0]));
  const auto rows = static_cast<int64_t>(op.attr);
  if (static_cast<double>(rows) != op.attr || rows < 1) {
    return InvalidArgument(fmt::format("{}: attr must be the result's row count >= 1, got {}",
                                       OpName(op.code), op.attr));
  }
  return TensorType{DType::kF32, {rows, v.shape[1]}, {-1, -1}};  // partial when v is cut
}

Result<TensorType> InferGatherRows(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2, Dims::kDynamicRows));
  const TensorType& table = *t[0];
  const TensorType& ids = *t[1];
  ATOLL_RETURN_IF_ERROR(NeedF32(op, table));
  if (table.shape.size() != 2 || !IsReplicated(table) || !IsStatic(table)) {
    return InvalidArgument(fmt::format("{}: table must be a replicated f32[r,d], got {}",
                                       OpName(op.code), Describe(table)));
  }
  if (ids.dtype != DType::kI32 || ids.shape.size() != 1) {
    return InvalidArgument(
        fmt::format("{}: ids must be i32[m], got {}", OpName(op.code), Describe(ids)));
  }
  return TensorType{DType::kF32, {ids.shape[0], table.shape[1]}, {ids.split[0], -1}};
}

// kTopKValues/kTopKIndices: each row's k best of its n values; the row must be whole.
Result<TensorType> InferTopK(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1, Dims::kDynamicRows));
  TensorType out = *t[0];
  ATOLL_RETURN_IF_ERROR(NeedF32(op, out));
  ATOLL_RETURN_IF_ERROR(NeedWholeRows(op, out));
  const int64_t n = out.shape.back();
  const auto k = static_cast<int64_t>(op.attr);
  if (n == kDynamicDim || static_cast<double>(k) != op.attr || k < 1 || k > n) {
    return InvalidArgument(fmt::format("{}: attr must be k in [1, n] for x {}, got {}",
                                       OpName(op.code), Describe(out), op.attr));
  }
  out.shape.back() = k;
  if (op.code == OpCode::kTopKIndices) out.dtype = DType::kI32;
  return out;
}

// kColumn: column j of every row; the rows may be cut, so each device takes its rows' j.
Result<TensorType> InferColumn(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1, Dims::kDynamicRows));
  const TensorType& x = *t[0];
  if ((x.dtype != DType::kF32 && x.dtype != DType::kI32) || x.shape.size() != 2) {
    return InvalidArgument(
        fmt::format("{} needs x f32 or i32 [m,n], got {}", OpName(op.code), Describe(x)));
  }
  ATOLL_RETURN_IF_ERROR(NeedWholeRows(op, x));
  const auto j = static_cast<int64_t>(op.attr);
  if (static_cast<double>(j) != op.attr || j < 0 || j >= x.shape[1]) {
    return InvalidArgument(fmt::format("{}: attr must be a column in [0, {}) of {}, got {}",
                                       OpName(op.code), x.shape[1], Describe(x), op.attr));
  }
  return TensorType{x.dtype, {x.shape[0]}, {x.split[0]}};
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
      ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1, Dims::kDynamicRows));
      ATOLL_RETURN_IF_ERROR(NeedF32(op, *t[0]));
      return *t[0];
    }
    case OpCode::kGeluGrad:
    case OpCode::kSgdUpdate: {
      ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2, Dims::kDynamicRows));
      ATOLL_RETURN_IF_ERROR(NeedF32(op, *t[0]));
      ATOLL_RETURN_IF_ERROR(NeedSameType(op, *t[0], *t[1]));
      if (op.code == OpCode::kSgdUpdate && !(std::isfinite(op.attr) && op.attr >= 0)) {
        return InvalidArgument(
            fmt::format("sgd_update: learning rate must be >= 0, got {}", op.attr));
      }
      return *t[0];
    }
    case OpCode::kBiasAdd: {
      ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2, Dims::kDynamicRows));
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
      ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1, Dims::kDynamicRows));
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
    case OpCode::kAdamParam:
    case OpCode::kAdamM:
    case OpCode::kAdamV:
      return InferAdam(fn, op);
    case OpCode::kGroupedMatmul:
      return InferGroupedMatmul(fn, op);
    case OpCode::kGroupedWeightGrad:
      return InferGroupedWeightGrad(fn, op);
    case OpCode::kScatterAddRows:
      return InferScatterAddRows(fn, op);
    case OpCode::kGatherRows:
      return InferGatherRows(fn, op);
    case OpCode::kTopKValues:
    case OpCode::kTopKIndices:
      return InferTopK(fn, op);
    case OpCode::kColumn:
      return InferColumn(fn, op);
    default:
      return InvalidArgument(fmt::format("unknown op code {}", static_cast<int>(op.code)));
  }
}

}  // namespace atl::ir::internal
