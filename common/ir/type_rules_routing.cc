// The type rules of the routed-expert ops (grouped matmul and its weight gradient, row
// scatter-add and gather) and of the gating ops (top-k, column): see common/ir/ops.def.
#include <fmt/format.h>

#include "common/ir/type_rules.h"

namespace atl::ir::internal {

namespace {

// Rows [m,k] that a grouped op splits by device: f32 or f64, cut along some mesh axis (the
// experts' axis), the columns whole.
Result<int32_t> NeedGroupedRows(const Op& op, const TensorType& x, std::string_view what) {
  ATOLL_RETURN_IF_ERROR(NeedDType(op, x, kWideFloats, what));
  if (x.shape.size() != 2 || x.split[0] < 0 || x.split[1] >= 0) {
    return InvalidArgument(
        fmt::format("{}: {} must be [m,k] with the rows cut along a mesh axis and the "
                    "columns whole, got {}",
                    OpName(op.code), what, Describe(x)));
  }
  return x.split[0];
}

// Row ids i32 or i64 [m] cut like the rows they index (`rows_axis`, -1: not cut).
Status NeedRowIds(const Op& op, const TensorType& ids, int64_t m, int32_t rows_axis) {
  ATOLL_RETURN_IF_ERROR(NeedDType(op, ids, kIntegers, "ids"));
  if (ids.shape == Shape{m} && ids.split[0] == rows_axis) return Status::Ok();
  return InvalidArgument(fmt::format("{}: ids must be [{}] cut like the rows, got {}",
                                     OpName(op.code), m == kDynamicDim ? "?" : fmt::to_string(m),
                                     Describe(ids)));
}

}  // namespace

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
  if (w.dtype != x.dtype || w.shape.size() != 3 || !IsStatic(w) ||
      w.split != std::vector<int32_t>{axis, -1, -1} || w.shape[k_dim] != x.shape[1]) {
    return InvalidArgument(
        fmt::format("{}: w must be {}[G,{},n]{} with G cut along x's row axis {}, got {} for x {}",
                    OpName(op.code), DTypeName(x.dtype), x.shape[1],
                    op.attr == 1 ? " transposed ([G,n,k])" : "", axis, Describe(w), Describe(x)));
  }
  return TensorType{x.dtype, {x.shape[0], w.shape[3 - k_dim]}, {axis, -1}};
}

Result<TensorType> InferGroupedWeightGrad(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2, Dims::kDynamicRows));
  ATOLL_ASSIGN_OR_RETURN(const int32_t axis, NeedGroupedRows(op, *t[0], "x"));
  ATOLL_ASSIGN_OR_RETURN(const int32_t dy_axis, NeedGroupedRows(op, *t[1], "dy"));
  if (axis != dy_axis || t[0]->shape[0] != t[1]->shape[0] || t[0]->dtype != t[1]->dtype) {
    return InvalidArgument(
        fmt::format("{}: x and dy need the same rows and dtype, cut alike; got {} and {}",
                    OpName(op.code), Describe(*t[0]), Describe(*t[1])));
  }
  const int64_t groups = WholeAttr(op.attr).value_or(0);
  if (groups < 1) {
    return InvalidArgument(
        fmt::format("{}: attr must be the group count G >= 1, got {}", OpName(op.code), op.attr));
  }
  return TensorType{t[0]->dtype, {groups, t[0]->shape[1], t[1]->shape[1]}, {axis, -1, -1}};
}

Result<TensorType> InferScatterAddRows(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2, Dims::kDynamicRows));
  const TensorType& v = *t[0];
  ATOLL_RETURN_IF_ERROR(NeedDType(op, v, kWideFloats, "values"));
  if (v.shape.size() != 2 || v.split[1] >= 0) {
    return InvalidArgument(fmt::format("{}: values must be [m,d] with whole rows, got {}",
                                       OpName(op.code), Describe(v)));
  }
  ATOLL_RETURN_IF_ERROR(NeedRowIds(op, *t[1], v.shape[0], v.split[0]));
  const int64_t rows = WholeAttr(op.attr).value_or(0);
  if (rows < 1) {
    return InvalidArgument(fmt::format("{}: attr must be the result's row count >= 1, got {}",
                                       OpName(op.code), op.attr));
  }
  return TensorType{v.dtype, {rows, v.shape[1]}, {-1, -1}};  // partial when v is cut
}

Result<TensorType> InferGatherRows(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2, Dims::kDynamicRows));
  const TensorType& table = *t[0];
  const TensorType& ids = *t[1];
  ATOLL_RETURN_IF_ERROR(NeedDType(op, table, kWideFloats, "table"));
  if (table.shape.size() != 2 || !IsReplicated(table) || !IsStatic(table)) {
    return InvalidArgument(fmt::format("{}: table must be a replicated [r,d], got {}",
                                       OpName(op.code), Describe(table)));
  }
  ATOLL_RETURN_IF_ERROR(NeedDType(op, ids, kIntegers, "ids"));
  if (ids.shape.size() != 1) {
    return InvalidArgument(
        fmt::format("{}: ids must be [m], got {}", OpName(op.code), Describe(ids)));
  }
  return TensorType{table.dtype, {ids.shape[0], table.shape[1]}, {ids.split[0], -1}};
}

// kTopKValues/kTopKIndices: each row's k best of its n values; the row must be whole.
Result<TensorType> InferTopK(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1, Dims::kDynamicRows));
  TensorType out = *t[0];
  ATOLL_RETURN_IF_ERROR(NeedDType(op, out, kWideFloats));
  ATOLL_RETURN_IF_ERROR(NeedWholeRows(op, out));
  const int64_t n = out.shape.back();
  const int64_t k = WholeAttr(op.attr).value_or(0);
  if (n == kDynamicDim || k < 1 || k > n) {
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
  if (x.shape.size() != 2) {
    return InvalidArgument(
        fmt::format("{} needs a matrix x, got {}", OpName(op.code), Describe(x)));
  }
  ATOLL_RETURN_IF_ERROR(NeedWholeRows(op, x));
  const int64_t j = WholeAttr(op.attr).value_or(-1);
  if (j < 0 || j >= x.shape[1]) {
    return InvalidArgument(fmt::format("{}: attr must be a column in [0, {}) of {}, got {}",
                                       OpName(op.code), x.shape[1], Describe(x), op.attr));
  }
  return TensorType{x.dtype, {x.shape[0]}, {x.split[0]}};
}

}  // namespace atl::ir::internal
