// The type rules of the jax.lax primitives that compute (elementwise, select, convert,
// reductions, dot_general); type_rules_lax_shape.cc has those that move data. Each follows
// jax.lax's shape rule and adds what a shard may be given (ops.def says, row by row).
#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/ir/type_rules.h"

namespace atl::ir::internal {

namespace {

enum Gives { kSame, kBool };

struct ElementwiseRow {
  OpCode code;
  DTypeSet takes;
  Gives gives;
};

// The rows of lax_binary_ops.def and lax_unary_ops.def, for their shared rules.
constexpr ElementwiseRow kElementwiseRows[] = {
#define ATOLL_BINARY_OP(Name, name, Takes, Gives) {OpCode::k##Name, Takes, Gives},
#include "common/ir/lax_binary_ops.def"
#define ATOLL_LAX_UNARY_OP(Name, name, Takes, Gives) {OpCode::k##Name, Takes, Gives},
#include "common/ir/lax_unary_ops.def"
};

const ElementwiseRow& ElementwiseRowOf(OpCode code) {
  for (const ElementwiseRow& row : kElementwiseRows) {
    if (row.code == code) return row;
  }
  return kElementwiseRows[0];  // never: the rules are looked up by these codes only
}

TensorType WithDType(TensorType t, Gives gives) {
  if (gives == kBool) t.dtype = DType::kBool;
  return t;
}

// `t` is a [] tensor of `dtype`, replicated, or has the type `like`: an operand that
// jax.lax lets be a scalar where others are arrays (select_n's which, clamp's bounds).
Status NeedLikeOrScalar(const Op& op, const TensorType& t, const TensorType& like, DType dtype,
                        std::string_view what) {
  if (t.dtype == dtype &&
      (t.shape == like.shape ? t.split == like.split : t.shape.empty() && IsReplicated(t))) {
    return Status::Ok();
  }
  return InvalidArgument(fmt::format(
      "{}: {} must be {} shaped and cut as {} or a replicated {}[], "
      "got {}",
      OpName(op.code), what, DTypeName(dtype), Describe(like), DTypeName(dtype), Describe(t)));
}

// The dimension list `dims` (of a rank-`rank` operand): each in range, none twice.
Status NeedDimensions(const Op& op, const std::vector<int64_t>& dims, size_t rank,
                      std::string_view what) {
  std::set<int64_t> seen;
  for (int64_t d : dims) {
    if (d < 0 || d >= static_cast<int64_t>(rank) || !seen.insert(d).second) {
      return InvalidArgument(
          fmt::format("{}: {} [{}] must be distinct dimensions of a rank-{} "
                      "operand",
                      OpName(op.code), what, fmt::join(dims, ","), rank));
    }
  }
  return Status::Ok();
}

}  // namespace

TensorType Without(const TensorType& t, const std::vector<int64_t>& dims, DType dtype) {
  TensorType out{dtype, {}, {}};
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end()) continue;
    out.shape.push_back(t.shape[d]);
    out.split.push_back(t.split[d]);
  }
  return out;
}

// A numeric x and params {axis}, an axis of x that is not cut (argmax, the cumulative
// reductions: each looks along the whole axis): the axis.
Result<size_t> NumericAlongWholeAxis(const Op& op, const TensorType& x) {
  ATOLL_RETURN_IF_ERROR(NeedDType(op, x, kNumeric));
  if (op.params.size() != 1) {
    return InvalidArgument(fmt::format("{}: params must be {{axis}}, got {} values",
                                       OpName(op.code), op.params.size()));
  }
  ATOLL_RETURN_IF_ERROR(NeedDimensions(op, op.params, x.shape.size(), "params (axis)"));
  const auto axis = static_cast<size_t>(op.params[0]);
  if (x.split[axis] >= 0) {
    return InvalidArgument(
        fmt::format("{}: axis {} is cut along mesh axis {}, and it looks along "
                    "the whole axis; gather it first (all_gather), got {}",
                    OpName(op.code), axis, x.split[axis], Describe(x)));
  }
  return axis;
}

Result<DType> DTypeAttr(const Op& op, double attr, std::string_view what) {
  const std::optional<int64_t> code = WholeAttr(attr);
  if (!code || *code < 0 || *code >= static_cast<int64_t>(kNumDTypes)) {
    return InvalidArgument(fmt::format("{}: {} must be a dtype's code (0 to {}), got {}",
                                       OpName(op.code), what, kNumDTypes - 1, attr));
  }
  return static_cast<DType>(*code);
}

Result<TensorType> InferLaxBinary(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2));
  const ElementwiseRow& row = ElementwiseRowOf(op.code);
  ATOLL_RETURN_IF_ERROR(NeedDType(op, *t[0], row.takes, "operands"));
  ATOLL_RETURN_IF_ERROR(NeedSameType(op, *t[0], *t[1]));
  return WithDType(*t[0], row.gives);
}

Result<TensorType> InferLaxUnary(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  const ElementwiseRow& row = ElementwiseRowOf(op.code);
  ATOLL_RETURN_IF_ERROR(NeedDType(op, *t[0], row.takes, "operand"));
  return WithDType(*t[0], row.gives);
}

Result<TensorType> InferSelectN(const FunctionDef& fn, const Op& op) {
  if (op.operands.size() < 2) {
    return InvalidArgument(
        fmt::format("select_n takes which and at least one case, got {} "
                    "operand{}",
                    op.operands.size(), op.operands.size() == 1 ? "" : "s"));
  }
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, op.operands.size()));
  const TensorType& first = *t[1];
  for (size_t i = 2; i < t.size(); ++i) {
    ATOLL_RETURN_IF_ERROR(NeedSameType(op, first, *t[i]));
  }
  const size_t cases = t.size() - 1;
  if (t[0]->dtype != DType::kBool && t[0]->dtype != DType::kI32) {
    return InvalidArgument(
        fmt::format("select_n: which must be bool or i32, got {}", Describe(*t[0])));
  }
  if (t[0]->dtype == DType::kBool && cases > 2) {
    return InvalidArgument(fmt::format("select_n: a bool which picks from 2 cases, got {}", cases));
  }
  ATOLL_RETURN_IF_ERROR(NeedLikeOrScalar(op, *t[0], first, t[0]->dtype, "which"));
  return first;
}

Result<TensorType> InferClamp(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 3));
  const TensorType& x = *t[1];
  ATOLL_RETURN_IF_ERROR(NeedDType(op, x, kNumeric, "x"));
  ATOLL_RETURN_IF_ERROR(NeedLikeOrScalar(op, *t[0], x, x.dtype, "lo"));
  ATOLL_RETURN_IF_ERROR(NeedLikeOrScalar(op, *t[2], x, x.dtype, "hi"));
  return x;
}

Result<TensorType> InferConvertElementType(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1, Dims::kAny));
  ATOLL_ASSIGN_OR_RETURN(const DType to, DTypeAttr(op, op.attr, "attr (the new dtype)"));
  TensorType out = *t[0];
  out.dtype = to;
  return out;
}

Result<TensorType> InferReduceAxes(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  const bool logical = op.code == OpCode::kReduceAnd || op.code == OpCode::kReduceOr;
  ATOLL_RETURN_IF_ERROR(NeedDType(op, *t[0], logical ? kAllIntegers | kBoolSet : kNumeric));
  ATOLL_RETURN_IF_ERROR(NeedDimensions(op, op.params, t[0]->shape.size(), "params (axes)"));
  return Without(*t[0], op.params, t[0]->dtype);
}

Result<TensorType> InferDotGeneral(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2));
  const TensorType& lhs = *t[0];
  const TensorType& rhs = *t[1];
  ATOLL_RETURN_IF_ERROR(NeedDType(op, lhs, kNumeric, "lhs"));
  if (lhs.dtype != rhs.dtype) {
    return InvalidArgument(
        fmt::format("dot_general: lhs and rhs must have one dtype, got {} and "
                    "{}",
                    Describe(lhs), Describe(rhs)));
  }
  // params: nc, lhs contracting, rhs contracting, nb, lhs batch, rhs batch.
  const std::vector<int64_t>& p = op.params;
  auto bad = [&](std::string_view why) {
    return InvalidArgument(
        fmt::format("dot_general: params [{}] {}: expected nc, lhs "
                    "contracting (nc), rhs contracting (nc), nb, lhs batch "
                    "(nb), rhs batch (nb)",
                    fmt::join(p, ","), why));
  };
  if (p.empty() || p[0] < 0 || static_cast<size_t>(p[0]) * 2 + 2 > p.size()) {
    return bad("are too short");
  }
  const auto nc = static_cast<size_t>(p[0]);
  const auto nb = p[1 + 2 * nc];
  if (nb < 0 || p.size() != 2 + 2 * nc + 2 * static_cast<size_t>(nb))
    return bad("have the wrong count");
  const std::vector<int64_t> lc(p.begin() + 1, p.begin() + 1 + nc);
  const std::vector<int64_t> rc(p.begin() + 1 + nc, p.begin() + 1 + 2 * nc);
  const std::vector<int64_t> lb(p.begin() + 2 + 2 * nc, p.begin() + 2 + 2 * nc + nb);
  const std::vector<int64_t> rb(p.begin() + 2 + 2 * nc + nb, p.end());
  std::vector<int64_t> lused = lc, rused = rc;
  lused.insert(lused.end(), lb.begin(), lb.end());
  rused.insert(rused.end(), rb.begin(), rb.end());
  ATOLL_RETURN_IF_ERROR(NeedDimensions(op, lused, lhs.shape.size(), "lhs contracting and batch"));
  ATOLL_RETURN_IF_ERROR(NeedDimensions(op, rused, rhs.shape.size(), "rhs contracting and batch"));
  auto pair = [&](int64_t l, int64_t r, std::string_view kind) -> Status {
    if (lhs.shape[l] != rhs.shape[r]) {
      return InvalidArgument(
          fmt::format("dot_general: {} dimension {} of lhs ({}) and {} of rhs "
                      "({}) differ in size",
                      kind, l, lhs.shape[l], r, rhs.shape[r]));
    }
    if (lhs.split[l] != rhs.split[r]) {
      auto along = [](int32_t axis) {
        return axis < 0 ? std::string("not cut") : fmt::format("cut along mesh axis {}", axis);
      };
      return InvalidArgument(fmt::format(
          "dot_general: {} dimension {} of lhs ({}) and {} of rhs ({}) must be "
          "cut alike, got {} and {}",
          kind, l, along(lhs.split[l]), r, along(rhs.split[r]), Describe(lhs), Describe(rhs)));
    }
    return Status::Ok();
  };
  for (size_t i = 0; i < nc; ++i) ATOLL_RETURN_IF_ERROR(pair(lc[i], rc[i], "contracting"));
  for (size_t i = 0; i < static_cast<size_t>(nb); ++i) {
    ATOLL_RETURN_IF_ERROR(pair(lb[i], rb[i], "batch"));
  }
  DType dtype = lhs.dtype;
  if (op.attr != -1) {
    ATOLL_ASSIGN_OR_RETURN(dtype, DTypeAttr(op, op.attr, "attr (the preferred element type)"));
    ATOLL_RETURN_IF_ERROR(NeedDType(op, TensorType{dtype, {}, {}}, kNumeric, "results"));
  }
  TensorType out{dtype, {}, {}};
  for (int64_t d : lb) {
    out.shape.push_back(lhs.shape[d]);
    out.split.push_back(lhs.split[d]);
  }
  for (const auto* side : {&lhs, &rhs}) {
    const std::vector<int64_t>& used = side == &lhs ? lused : rused;
    for (size_t d = 0; d < side->shape.size(); ++d) {
      if (std::find(used.begin(), used.end(), static_cast<int64_t>(d)) != used.end()) continue;
      out.shape.push_back(side->shape[d]);
      out.split.push_back(side->split[d]);
    }
  }
  // A mesh axis may cut one dimension of the result only (a free dimension of each operand
  // along the same axis would be a block that no device holds).
  std::set<int32_t> axes;
  for (int32_t axis : out.split) {
    if (axis >= 0 && !axes.insert(axis).second) {
      return InvalidArgument(
          fmt::format("dot_general: the result {}{} would be cut twice along "
                      "mesh axis {} (free dimensions of lhs and rhs cut along "
                      "one axis); gather one operand first",
                      DTypeName(out.dtype), ShapeString(out.shape), axis));
    }
  }
  return out;
}

Result<TensorType> InferIntegerPow(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  ATOLL_RETURN_IF_ERROR(NeedDType(op, *t[0], kNumeric));
  const std::optional<int64_t> y = WholeAttr(op.attr);
  if (!y || *y < -(int64_t{1} << 31) || *y >= (int64_t{1} << 31)) {
    return InvalidArgument(
        fmt::format("integer_pow: the exponent (attr) must be a whole number "
                    "of int32's range, got {}",
                    op.attr));
  }
  if (*y < 0 && !IsFloating(t[0]->dtype)) {
    return InvalidArgument(
        fmt::format("integer_pow: a negative exponent {} needs a float x, got "
                    "{}",
                    *y, Describe(*t[0])));
  }
  return *t[0];
}

Result<TensorType> InferBitcastConvertType(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  ATOLL_ASSIGN_OR_RETURN(const DType to, DTypeAttr(op, op.attr, "attr (the new dtype)"));
  const auto bits_are_kept = [](DType d) {
    return d != DType::kBool && ClassOf(d) != DTypeClass::kStorage;  // (no 16-bit integers)
  };
  if (DTypeSize(to) != DTypeSize(t[0]->dtype) || !bits_are_kept(to) ||
      !bits_are_kept(t[0]->dtype)) {
    return InvalidArgument(
        fmt::format("bitcast_convert_type: {} and {} must be numeric and of "
                    "one width ({} and {} bytes)",
                    Describe(*t[0]), DTypeName(to), DTypeSize(t[0]->dtype), DTypeSize(to)));
  }
  TensorType out = *t[0];
  out.dtype = to;
  return out;
}

}  // namespace atl::ir::internal
