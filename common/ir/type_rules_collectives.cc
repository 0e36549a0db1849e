// The type rules of the collectives (see common/ir/ops.def). What needs the slice's mesh (the
// axis exists, the sizes divide over it, roots and pairs name members) is checked by
// ir::Validate once the function has its slice.
#include <algorithm>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "common/ir/type_rules.h"

namespace atl::ir::internal {

namespace {

// The op's mesh axis (attr): a whole number >= 0, or kWholeSlice where `whole_slice_ok`.
Result<int32_t> CollectiveAxis(const Op& op, bool whole_slice_ok) {
  const std::optional<int64_t> axis = WholeAttr(op.attr);
  if (axis && whole_slice_ok && *axis == kWholeSlice) return kWholeSlice;
  if (!axis || *axis < 0 || *axis > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument(fmt::format("{}: the mesh axis must be a whole number >= 0{}, got {}",
                                       OpName(op.code),
                                       whole_slice_ok ? " (or -1: the whole slice)" : "", op.attr));
  }
  return static_cast<int32_t>(*axis);
}

// The dimension of `t` cut along `axis`, or -1.
int DimCutAlong(const TensorType& t, int32_t axis) {
  const auto it = std::find(t.split.begin(), t.split.end(), axis);
  return it == t.split.end() ? -1 : static_cast<int>(it - t.split.begin());
}

// The dimension of `t` cut along `axis`, which the op needs.
Result<int> NeedCutAlong(const Op& op, const TensorType& t, int32_t axis) {
  const int dim = DimCutAlong(t, axis);
  if (dim >= 0) return dim;
  return InvalidArgument(fmt::format("{} along mesh axis {} needs a tensor cut along it, got {}",
                                     OpName(op.code), axis, Describe(t)));
}

Status NeedNotCutAlong(const Op& op, const TensorType& t, int32_t axis) {
  if (DimCutAlong(t, axis) < 0) return Status::Ok();
  return InvalidArgument(
      fmt::format("{} over mesh axis {} takes a tensor not cut along it (each device's own value, "
                  "a partial one for a sum), got {}",
                  OpName(op.code), axis, Describe(t)));
}

// params[0], a dimension of `t` that no mesh axis cuts.
Result<int> UncutDimParam(const Op& op, const TensorType& t) {
  if (op.params.size() != 1 || op.params[0] < 0 ||
      op.params[0] >= static_cast<int64_t>(t.shape.size())) {
    return InvalidArgument(
        fmt::format("{}: params must be one dimension of {}", OpName(op.code), Describe(t)));
  }
  const auto dim = static_cast<int>(op.params[0]);
  if (t.split[dim] >= 0) {
    return InvalidArgument(
        fmt::format("{}: dimension {} of {} is cut already", OpName(op.code), dim, Describe(t)));
  }
  return dim;
}

}  // namespace

Result<TensorType> InferAllReduce(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  ATOLL_ASSIGN_OR_RETURN(const int32_t axis, CollectiveAxis(op, /*whole_slice_ok=*/true));
  if (op.code == OpCode::kAllReduceMean) ATOLL_RETURN_IF_ERROR(NeedDType(op, *t[0], kFloats));
  if (axis != kWholeSlice) {
    ATOLL_RETURN_IF_ERROR(NeedNotCutAlong(op, *t[0], axis));
  } else if (!IsReplicated(*t[0])) {
    return InvalidArgument(
        fmt::format("{} over the whole slice takes a replicated tensor (each device's partial "
                    "value), not a split one: got {}",
                    OpName(op.code), Describe(*t[0])));
  }
  return *t[0];
}

Result<TensorType> InferAllGather(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  ATOLL_ASSIGN_OR_RETURN(const int32_t axis, CollectiveAxis(op, /*whole_slice_ok=*/false));
  ATOLL_ASSIGN_OR_RETURN(const int dim, NeedCutAlong(op, *t[0], axis));
  TensorType out = *t[0];
  out.split[dim] = -1;
  return out;
}

Result<TensorType> InferReduceScatter(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  ATOLL_ASSIGN_OR_RETURN(const int32_t axis, CollectiveAxis(op, /*whole_slice_ok=*/false));
  ATOLL_RETURN_IF_ERROR(NeedNotCutAlong(op, *t[0], axis));
  ATOLL_ASSIGN_OR_RETURN(const int dim, UncutDimParam(op, *t[0]));
  TensorType out = *t[0];
  out.split[dim] = axis;
  return out;
}

Result<TensorType> InferAllToAll(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  ATOLL_ASSIGN_OR_RETURN(const int32_t axis, CollectiveAxis(op, /*whole_slice_ok=*/false));
  ATOLL_ASSIGN_OR_RETURN(const int from, NeedCutAlong(op, *t[0], axis));
  ATOLL_ASSIGN_OR_RETURN(const int to, UncutDimParam(op, *t[0]));
  TensorType out = *t[0];
  out.split[from] = -1;
  out.split[to] = axis;
  return out;
}

Result<TensorType> InferBroadcast(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  ATOLL_ASSIGN_OR_RETURN(const int32_t axis, CollectiveAxis(op, /*whole_slice_ok=*/false));
  ATOLL_RETURN_IF_ERROR(NeedNotCutAlong(op, *t[0], axis));
  if (op.params.size() != 1 || op.params[0] < 0) {
    return InvalidArgument(
        fmt::format("broadcast: params must be the root's coordinate along the axis (>= 0)"));
  }
  return *t[0];
}

Result<TensorType> InferCollectivePermute(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  ATOLL_RETURN_IF_ERROR(CollectiveAxis(op, /*whole_slice_ok=*/false).status());
  if (op.params.empty() || op.params.size() % 2 != 0) {
    return InvalidArgument(
        "collective_permute: params must be (source, target) pairs of coordinates, at least one");
  }
  std::set<int64_t> sources, targets;
  for (size_t i = 0; i < op.params.size(); i += 2) {
    const int64_t source = op.params[i], target = op.params[i + 1];
    if (source < 0 || target < 0) {
      return InvalidArgument(fmt::format(
          "collective_permute: pair ({}, {}) names a negative coordinate", source, target));
    }
    if (!sources.insert(source).second || !targets.insert(target).second) {
      return InvalidArgument(fmt::format(
          "collective_permute: pair ({}, {}) repeats a source or a target; each sends and "
          "receives at most once",
          source, target));
    }
  }
  return *t[0];
}

}  // namespace atl::ir::internal
