#include "common/ir/type_rules.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace atl::ir {

std::string Describe(const TensorType& t) {
  return fmt::format("{}{} split [{}]", DTypeName(t.dtype), ShapeString(t.shape),
                     fmt::join(t.split, ","));
}

}  // namespace atl::ir

namespace atl::ir::internal {

namespace {

bool Fits(const TensorType& t, Dims dims) {
  if (dims == Dims::kAny) return true;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (t.shape[d] == kDynamicDim && !(d == 0 && dims == Dims::kDynamicRows)) return false;
  }
  return true;
}

// A per-feature parameter of a row-wise op: [d] of the rows' dtype, replicated.
Status NeedFeatureParam(const Op& op, const TensorType& p, DType dtype, int64_t d,
                        std::string_view what) {
  if (p.dtype != dtype || p.shape != Shape{d} || !IsReplicated(p)) {
    return InvalidArgument(fmt::format("{}: {} must be replicated {}[{}], got {}", OpName(op.code),
                                       what, DTypeName(dtype), d, Describe(p)));
  }
  return Status::Ok();
}

Status NeedPositiveAttr(const Op& op, std::string_view what) {
  if (std::isfinite(op.attr) && op.attr > 0) return Status::Ok();
  return InvalidArgument(fmt::format("{}: {} must be > 0, got {}", OpName(op.code), what, op.attr));
}

}  // namespace

Result<std::vector<const TensorType*>> Tensors(const FunctionDef& fn, const Op& op, size_t n,
                                               Dims dims) {
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
  for (size_t i = n; i < op.operands.size(); ++i) {
    if (op.operands[i].kind != Operand::kScalar) {
      return InvalidArgument(fmt::format("{} operand {} must be a scalar", OpName(op.code), i));
    }
  }
  return types;
}

std::string DTypeSetName(DTypeSet set) {
  std::vector<std::string_view> names;
  for (size_t code = 0; code < kNumDTypes; ++code) {
    if (set & SetOf(static_cast<DType>(code))) names.push_back(DTypeName(static_cast<DType>(code)));
  }
  if (names.size() < 2) return names.empty() ? "no dtype" : std::string(names[0]);
  return fmt::format("{} or {}", fmt::join(names.begin(), names.end() - 1, ", "), names.back());
}

Status NeedDType(const Op& op, const TensorType& t, DTypeSet accepted, std::string_view what) {
  if (accepted & SetOf(t.dtype)) return Status::Ok();
  return InvalidArgument(fmt::format("{} takes {}{}{}, got {}", OpName(op.code),
                                     DTypeSetName(accepted), what.empty() ? "" : " ", what,
                                     Describe(t)));
}

std::optional<int64_t> WholeAttr(double attr) {
  // [-2^63, 2^63): the doubles whose integer part int64 holds; NaN fails both comparisons.
  if (!(attr >= -0x1p63 && attr < 0x1p63)) return std::nullopt;
  const auto whole = static_cast<int64_t>(attr);
  if (static_cast<double>(whole) != attr) return std::nullopt;
  return whole;
}

Status CheckCountable(const TensorType& t) {
  Shape known = t.shape;
  std::replace(known.begin(), known.end(), kDynamicDim, int64_t{1});
  if (CheckedNumBytes(t.dtype, known).ok()) return Status::Ok();
  return InvalidArgument(fmt::format(
      "{} has a negative dimension or more bytes than an int64 can count", Describe(t)));
}

Status NeedWholeRows(const Op& op, const TensorType& t) {
  if (t.shape.empty()) {
    return InvalidArgument(fmt::format("{} needs rank >= 1, got {}", OpName(op.code), Describe(t)));
  }
  if (t.split.back() >= 0) {
    return InvalidArgument(
        fmt::format("{} computes over the last dimension, which must not be cut over devices, "
                    "but it is cut along mesh axis {}: got {}",
                    OpName(op.code), t.split.back(), Describe(t)));
  }
  return Status::Ok();
}

Status NeedSameType(const Op& op, const TensorType& a, const TensorType& b) {
  if (a == b) return Status::Ok();
  return InvalidArgument(
      fmt::format("{}: operand types differ: {} vs {}", OpName(op.code), Describe(a), Describe(b)));
}

Result<TensorType> InferArithmetic(const FunctionDef& fn, const Op& op) {
  const TensorType* a = OperandType(fn, op.operands[0]);
  const TensorType* b = OperandType(fn, op.operands[1]);
  if (!a && !b) return InvalidArgument("elementwise op on two scalars");
  if (!a || !b) return a ? *a : *b;
  // A [] tensor is broadcast over the other operand, as a scalar constant is.
  if (a->dtype == b->dtype && (a->shape.empty() || b->shape.empty())) {
    return a->shape.empty() ? *b : *a;
  }
  ATOLL_RETURN_IF_ERROR(NeedSameType(op, *a, *b));
  return *a;
}

Result<TensorType> InferSpin(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1, Dims::kAny));
  if (!(std::isfinite(op.attr) && op.attr >= 0)) {
    return InvalidArgument(
        fmt::format("spin time must be a finite number >= 0 us, got {}", op.attr));
  }
  return *t[0];
}

Result<TensorType> InferFilter(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1, Dims::kAny));
  if (t[0]->shape.size() != 1) return InvalidArgument("filter takes one 1-D tensor");
  TensorType out = *t[0];
  out.shape = {kDynamicDim};
  return out;
}

Result<TensorType> InferUnary(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1, Dims::kDynamicRows));
  ATOLL_RETURN_IF_ERROR(NeedDType(op, *t[0], kFloats));
  return *t[0];
}

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
  ATOLL_RETURN_IF_ERROR(NeedDType(op, a, kFloats));
  if (a.dtype != b.dtype) {
    return InvalidArgument("matmul needs operands of one dtype, got " + Describe(a) + " x " +
                           Describe(b));
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
  return TensorType{a.dtype, {a.shape[am], b.shape[bn]}, {m_axis, n_axis}};
}

namespace {

// Two tensors of one type, of a dtype in `accepted` (rows may be routed): the type.
Result<TensorType> SamePair(const FunctionDef& fn, const Op& op, DTypeSet accepted) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2, Dims::kDynamicRows));
  ATOLL_RETURN_IF_ERROR(NeedDType(op, *t[0], accepted));
  ATOLL_RETURN_IF_ERROR(NeedSameType(op, *t[0], *t[1]));
  return *t[0];
}

}  // namespace

Result<TensorType> InferGeluGrad(const FunctionDef& fn, const Op& op) {
  return SamePair(fn, op, kFloats);
}

Result<TensorType> InferBiasAdd(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2, Dims::kDynamicRows));
  const TensorType& x = *t[0];
  const TensorType& bias = *t[1];
  ATOLL_RETURN_IF_ERROR(NeedDType(op, x, kFloats, "x"));
  if (x.shape.empty() || bias.dtype != x.dtype || bias.shape != Shape{x.shape.back()} ||
      bias.split[0] != x.split.back()) {
    return InvalidArgument(
        fmt::format("bias_add needs x [...,n] and bias [n] of x's dtype, cut like x's last "
                    "dimension, got {} and {}",
                    Describe(x), Describe(bias)));
  }
  return x;
}

Result<TensorType> InferReduceSum(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  TensorType out = *t[0];
  ATOLL_RETURN_IF_ERROR(NeedDType(op, out, kFloats));
  const std::optional<int64_t> axis = WholeAttr(op.attr);
  if (!axis || *axis < 0 || *axis >= static_cast<int64_t>(out.shape.size())) {
    return InvalidArgument(
        fmt::format("reduce_sum over dimension {} of {}", op.attr, Describe(out)));
  }
  out.shape.erase(out.shape.begin() + *axis);
  out.split.erase(out.split.begin() + *axis);  // a cut axis: partial
  return out;
}

Result<TensorType> InferSoftmax(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1, Dims::kDynamicRows));
  ATOLL_RETURN_IF_ERROR(NeedDType(op, *t[0], kFloats));
  ATOLL_RETURN_IF_ERROR(NeedWholeRows(op, *t[0]));
  return *t[0];
}

Result<TensorType> InferLayerNorm(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 3));
  const TensorType& x = *t[0];
  ATOLL_RETURN_IF_ERROR(NeedDType(op, x, kWideFloats, "x"));
  ATOLL_RETURN_IF_ERROR(NeedWholeRows(op, x));
  ATOLL_RETURN_IF_ERROR(NeedFeatureParam(op, *t[1], x.dtype, x.shape.back(), "gamma"));
  ATOLL_RETURN_IF_ERROR(NeedFeatureParam(op, *t[2], x.dtype, x.shape.back(), "beta"));
  ATOLL_RETURN_IF_ERROR(NeedPositiveAttr(op, "epsilon"));
  return x;
}

Result<TensorType> InferLayerNormGrad(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 3));
  const TensorType& dy = *t[0];
  const TensorType& x = *t[1];
  ATOLL_RETURN_IF_ERROR(NeedDType(op, x, kWideFloats, "x"));
  ATOLL_RETURN_IF_ERROR(NeedSameType(op, dy, x));
  ATOLL_RETURN_IF_ERROR(NeedWholeRows(op, x));
  ATOLL_RETURN_IF_ERROR(NeedFeatureParam(op, *t[2], x.dtype, x.shape.back(), "gamma"));
  ATOLL_RETURN_IF_ERROR(NeedPositiveAttr(op, "epsilon"));
  if (op.code == OpCode::kLayerNormGradX) return x;
  return TensorType{x.dtype, {x.shape.back()}, {-1}};  // partial when x's rows are cut
}

Result<TensorType> InferCrossEntropy(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2));
  const TensorType& logits = *t[0];
  const TensorType& labels = *t[1];
  ATOLL_RETURN_IF_ERROR(NeedDType(op, logits, kFloats, "logits"));
  ATOLL_RETURN_IF_ERROR(NeedDType(op, labels, kIntegers, "labels"));
  if (logits.shape.size() != 2 || labels.shape != Shape{logits.shape[0]}) {
    return InvalidArgument(fmt::format("{} needs logits [b,c] and labels [b], got {} and {}",
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
  return TensorType{logits.dtype, {}, {}};  // partial when the rows are cut
}

Result<TensorType> InferTranspose(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  const TensorType& x = *t[0];
  if (x.shape.size() != 2) return InvalidArgument("transpose needs a matrix, got " + Describe(x));
  return TensorType{x.dtype, {x.shape[1], x.shape[0]}, {x.split[1], x.split[0]}};
}

Result<TensorType> InferSgdUpdate(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(TensorType param, SamePair(fn, op, kWideFloats));
  if (!(std::isfinite(op.attr) && op.attr >= 0)) {
    return InvalidArgument(fmt::format("sgd_update: learning rate must be >= 0, got {}", op.attr));
  }
  return param;
}

// The hyper-parameters are checked here so that a bad one is refused when the function is
// built, not on every step.
Result<TensorType> InferAdam(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 5));
  ATOLL_RETURN_IF_ERROR(NeedDType(op, *t[0], kWideFloats, "param"));
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

Result<TensorType> InferCast(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1, Dims::kAny));
  const int64_t code = WholeAttr(op.attr).value_or(-1);
  if (code < 0 || code >= static_cast<int64_t>(kNumDTypes)) {
    return InvalidArgument(
        fmt::format("cast: attr must be a dtype code in [0, {}), got {}", kNumDTypes, op.attr));
  }
  TensorType out = *t[0];
  out.dtype = static_cast<DType>(code);
  return out;
}

}  // namespace atl::ir::internal
