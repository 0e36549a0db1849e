// The type rules of the jax.lax primitives that move data without computing on it: reshape,
// broadcast_in_dim, transpose_nd, slice, concatenate, pad, rev and iota. A dimension cut over
// devices must come through whole, since each shard only holds its block of it: the rules
// refuse, naming the dimension and the mesh axis, what would need another shard's data.
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/ir/type_rules.h"

namespace atl::ir::internal {

namespace {

Status NeedParamCount(const Op& op, size_t want, std::string_view layout) {
  if (op.params.size() == want) return Status::Ok();
  return InvalidArgument(fmt::format("{}: params must be {} ({} values), got {}: [{}]",
                                     OpName(op.code), layout, want, op.params.size(),
                                     fmt::join(op.params, ",")));
}

Status NeedUncut(const Op& op, const TensorType& t, size_t dim, std::string_view why) {
  if (t.split[dim] < 0) return Status::Ok();
  return InvalidArgument(
      fmt::format("{}: dimension {} is cut along mesh axis {}, and {}; gather "
                  "it first (all_gather), got {}",
                  OpName(op.code), dim, t.split[dim], why, Describe(t)));
}

// The start operands of dynamic_slice and dynamic_update_slice, from operand `first` on: one
// replicated [] i32 or i64 per dimension of a rank-`rank` operand.
Status NeedStarts(const FunctionDef& fn, const Op& op, size_t first, size_t rank) {
  if (op.operands.size() != first + rank) {
    return InvalidArgument(
        fmt::format("{}: {} operand{} and one start per dimension ({}) "
                    "expected, got {} operands",
                    OpName(op.code), first, first == 1 ? "" : "s", rank, op.operands.size()));
  }
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, op.operands.size()));
  for (size_t i = first; i < t.size(); ++i) {
    const TensorType& s = *t[i];
    if ((s.dtype != DType::kI32 && s.dtype != DType::kI64) || !s.shape.empty()) {
      return InvalidArgument(fmt::format("{}: start {} must be an i32[] or i64[], got {}",
                                         OpName(op.code), i - first, Describe(s)));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<TensorType> InferDynamicSlice(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, op.operands.size()));
  const TensorType& x = *t[0];
  ATOLL_RETURN_IF_ERROR(NeedStarts(fn, op, 1, x.shape.size()));
  ATOLL_RETURN_IF_ERROR(NeedParamCount(op, x.shape.size(), "slice_sizes"));
  TensorType out{x.dtype, op.params, x.split};
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (op.params[d] < 0 || op.params[d] > x.shape[d]) {
      return InvalidArgument(
          fmt::format("dynamic_slice: slice size {} of dimension {} must be in "
                      "[0, {}] ({})",
                      op.params[d], d, x.shape[d], Describe(x)));
    }
    if (op.params[d] != x.shape[d]) {
      ATOLL_RETURN_IF_ERROR(NeedUncut(op, x, d, "a dynamic slice takes part of it"));
    }
  }
  return out;
}

Result<TensorType> InferDynamicUpdateSlice(const FunctionDef& fn, const Op& op) {
  if (op.operands.size() < 2) {
    return InvalidArgument("dynamic_update_slice takes x, update and the starts");
  }
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, op.operands.size()));
  const TensorType& x = *t[0];
  const TensorType& update = *t[1];
  ATOLL_RETURN_IF_ERROR(NeedStarts(fn, op, 2, x.shape.size()));
  if (update.dtype != x.dtype || update.shape.size() != x.shape.size()) {
    return InvalidArgument(
        fmt::format("dynamic_update_slice: update {} must have the dtype and "
                    "rank of {}",
                    Describe(update), Describe(x)));
  }
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (update.shape[d] > x.shape[d]) {
      return InvalidArgument(
          fmt::format("dynamic_update_slice: update {} is larger than {} along "
                      "dimension {}",
                      Describe(update), Describe(x), d));
    }
    const bool whole = update.shape[d] == x.shape[d] && update.split[d] == x.split[d];
    if (!whole) ATOLL_RETURN_IF_ERROR(NeedUncut(op, x, d, "a dynamic update writes part of it"));
    if (!whole && update.split[d] >= 0) {
      return InvalidArgument(
          fmt::format("dynamic_update_slice: update {} is cut on dimension {} along mesh "
                      "axis {} where x is not cut alike ({})",
                      Describe(update), d, update.split[d], Describe(x)));
    }
  }
  return x;
}

// The runs of dimensions a reshape maps onto each other, as small as they can be: the
// dimensions [from_begin, from_end) of the operand hold the elements of [to_begin, to_end) of
// the result (their products are equal). Sizes must all be positive and both shapes hold the
// same number of elements: then the smaller running product always has a dimension left to
// take, and one side running out leaves only 1s on the other.
struct ReshapeGroup {
  size_t from_begin, from_end, to_begin, to_end;
};

std::vector<ReshapeGroup> ReshapeGroups(const Shape& from, const Shape& to) {
  std::vector<ReshapeGroup> groups;
  size_t i = 0, j = 0;
  while (i < from.size() || j < to.size()) {
    ReshapeGroup g{i, i, j, j};
    int64_t in = i < from.size() ? from[i++] : 1;
    int64_t out = j < to.size() ? to[j++] : 1;
    while (in != out) {
      if (in < out) {
        in *= from[i++];
      } else {
        out *= to[j++];
      }
    }
    g.from_end = i;
    g.to_end = j;
    groups.push_back(g);
  }
  return groups;
}

// The first dimension of [begin, end) of `shape` bigger than 1, or `end`.
size_t FirstBiggerThanOne(const Shape& shape, size_t begin, size_t end) {
  while (begin < end && shape[begin] == 1) ++begin;
  return begin;
}

Result<TensorType> InferReshape(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  const TensorType& x = *t[0];
  const Shape& shape = op.params;
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; }) ||
      NumElements(shape) != NumElements(x.shape)) {
    return InvalidArgument(fmt::format("reshape: {} has {} elements, which shape {} does not hold",
                                       Describe(x), NumElements(x.shape), ShapeString(shape)));
  }
  TensorType out{x.dtype, shape, std::vector<int32_t>(shape.size(), -1)};
  if (std::none_of(x.split.begin(), x.split.end(), [](int32_t a) { return a >= 0; })) return out;
  const auto positive = [](const Shape& s) {
    return std::all_of(s.begin(), s.end(), [](int64_t d) { return d > 0; });
  };
  if (!positive(x.shape) || !positive(shape)) {
    // No elements (or a dynamic size): only dimensions 0 to d kept as they are keep d's cut.
    for (size_t d = 0; d < x.shape.size(); ++d) {
      if (x.split[d] < 0) continue;
      const bool kept =
          d < shape.size() && std::equal(x.shape.begin(), x.shape.begin() + d + 1, shape.begin());
      if (!kept) {
        ATOLL_RETURN_IF_ERROR(NeedUncut(op, x, d,
                                        "the new shape " + ShapeString(shape) +
                                            " does not keep dimensions 0 to " + std::to_string(d) +
                                            " as they are"));
      }
      out.split[d] = x.split[d];
    }
    return out;
  }
  // A shard holds a contiguous run of each group's elements exactly when the cut dimension
  // leads its group (the first bigger than 1): that run is then a cut of the group's leading
  // result dimension (which Validate checks divides over the axis). A cut behind it, or a
  // second cut in one group, would need other shards' elements.
  for (const ReshapeGroup& g : ReshapeGroups(x.shape, shape)) {
    const size_t lead = FirstBiggerThanOne(x.shape, g.from_begin, g.from_end);
    const size_t to = FirstBiggerThanOne(shape, g.to_begin, g.to_end);
    for (size_t d = g.from_begin; d < g.from_end; ++d) {
      if (x.split[d] < 0) continue;
      if (d != lead || to == g.to_end) {
        const std::string how =
            d > lead ? fmt::format(
                           "merges it behind dimension {} (a shard's block of it would "
                           "not be one run of the result's elements)",
                           lead)
                     : std::string("does not keep it as a dimension of its own");
        ATOLL_RETURN_IF_ERROR(
            NeedUncut(op, x, d, fmt::format("the new shape {} {}", ShapeString(shape), how)));
      }
      out.split[to] = x.split[d];
    }
  }
  return out;
}

Result<std::vector<int32_t>> BroadcastCuts(double attr, size_t rank) {
  std::vector<int32_t> cuts(rank, -1);
  if (attr < 0 || attr != std::floor(attr) || attr >= 9007199254740992.0) {
    return InvalidArgument(
        fmt::format("broadcast_in_dim: attr {} is not a whole number of 4-bit cut digits", attr));
  }
  auto code = static_cast<uint64_t>(attr);
  for (size_t d = 0; code != 0; ++d, code >>= 4) {
    if (d >= rank) {
      return InvalidArgument(fmt::format(
          "broadcast_in_dim: attr {} names a cut beyond the rank-{} result", attr, rank));
    }
    cuts[d] = static_cast<int32_t>(code & 15) - 1;
  }
  return cuts;
}

Result<TensorType> InferBroadcastInDim(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  const TensorType& x = *t[0];
  const size_t n = x.shape.size();
  if (op.params.size() < n) {
    return NeedParamCount(op, n, "shape then broadcast_dimensions");
  }
  const size_t r = op.params.size() - n;
  const Shape shape(op.params.begin(), op.params.begin() + r);
  const std::vector<int64_t> dims(op.params.begin() + r, op.params.end());
  TensorType out{x.dtype, shape, std::vector<int32_t>(r, -1)};
  for (size_t i = 0; i < n; ++i) {
    const bool increasing = i == 0 || dims[i] > dims[i - 1];
    if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(r) || !increasing) {
      return InvalidArgument(
          fmt::format("broadcast_in_dim: broadcast_dimensions [{}] must be "
                      "strictly increasing dimensions of the rank-{} result",
                      fmt::join(dims, ","), r));
    }
    const int64_t to = shape[dims[i]];
    if (x.shape[i] != to && x.shape[i] != 1) {
      return InvalidArgument(
          fmt::format("broadcast_in_dim: dimension {} of {} (size {}) cannot "
                      "become size {} (dimension {} of {})",
                      i, Describe(x), x.shape[i], to, dims[i], ShapeString(shape)));
    }
    if (x.split[i] >= 0 && x.shape[i] != to) {
      ATOLL_RETURN_IF_ERROR(NeedUncut(op, x, i, "it is broadcast"));
    }
    out.split[dims[i]] = x.split[i];
  }
  ATOLL_ASSIGN_OR_RETURN(const auto cuts, BroadcastCuts(op.attr, r));
  for (size_t d = 0; d < r; ++d) {
    if (cuts[d] < 0) continue;
    const auto from = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d));
    const bool whole = from != dims.end() && x.shape[from - dims.begin()] == shape[d];
    if (whole || out.split[d] >= 0) {
      return InvalidArgument(fmt::format(
          "broadcast_in_dim: attr asks for dimension {} of the result cut along mesh axis {}, "
          "but {} gives that dimension whole; only a dimension it broadcasts can be cut",
          d, cuts[d], Describe(x)));
    }
    out.split[d] = cuts[d];
  }
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; })) {
    return InvalidArgument(
        fmt::format("broadcast_in_dim: shape {} has a negative dimension", ShapeString(shape)));
  }
  return out;
}

Result<TensorType> InferTransposeNd(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  const TensorType& x = *t[0];
  const std::vector<int64_t>& perm = op.params;
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool is_permutation = sorted.size() == x.shape.size();
  for (size_t i = 0; is_permutation && i < sorted.size(); ++i) {
    is_permutation = sorted[i] == static_cast<int64_t>(i);
  }
  if (!is_permutation) {
    return InvalidArgument(
        fmt::format("transpose_nd: params [{}] must be a permutation of the "
                    "{} dimensions of {}",
                    fmt::join(perm, ","), x.shape.size(), Describe(x)));
  }
  TensorType out{x.dtype, {}, {}};
  for (int64_t d : perm) {
    out.shape.push_back(x.shape[d]);
    out.split.push_back(x.split[d]);
  }
  return out;
}

Result<TensorType> InferSlice(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  const TensorType& x = *t[0];
  const size_t n = x.shape.size();
  ATOLL_RETURN_IF_ERROR(NeedParamCount(op, 3 * n, "start, limit, strides"));
  TensorType out{x.dtype, {}, x.split};
  for (size_t d = 0; d < n; ++d) {
    const int64_t start = op.params[d], limit = op.params[n + d], stride = op.params[2 * n + d];
    if (start < 0 || start > limit || limit > x.shape[d] || stride < 1) {
      return InvalidArgument(
          fmt::format("slice: dimension {} of {}: start {}, limit {}, stride {} "
                      "must have 0 <= start <= limit <= {} and stride >= 1",
                      d, Describe(x), start, limit, stride, x.shape[d]));
    }
    if (start != 0 || limit != x.shape[d] || stride != 1) {
      ATOLL_RETURN_IF_ERROR(NeedUncut(op, x, d, "a slice takes part of it"));
    }
    out.shape.push_back(limit == start ? 0 : (limit - start - 1) / stride + 1);
  }
  return out;
}

Result<TensorType> InferConcatenate(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, op.operands.size()));
  const TensorType& first = *t[0];
  const std::optional<int64_t> attr = WholeAttr(op.attr);
  if (!attr || *attr < 0 || *attr >= static_cast<int64_t>(first.shape.size())) {
    return InvalidArgument(
        fmt::format("concatenate: attr (the dimension) must be a dimension of "
                    "{}, got {}",
                    Describe(first), op.attr));
  }
  const auto dim = static_cast<size_t>(*attr);
  ATOLL_RETURN_IF_ERROR(NeedUncut(op, first, dim, "the operands are joined along it"));
  TensorType out = first;
  for (size_t i = 1; i < t.size(); ++i) {
    const TensorType& x = *t[i];
    TensorType like = x;
    like.shape[dim] = first.shape[dim];
    if (x.shape.size() != first.shape.size() || !(like == first)) {
      return InvalidArgument(
          fmt::format("concatenate: operand {} is {}; every operand must be {} "
                      "but for the size of dimension {}",
                      i, Describe(x), Describe(first), dim));
    }
    out.shape[dim] += x.shape[dim];
  }
  return out;
}

Result<TensorType> InferPad(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2));
  const TensorType& x = *t[0];
  const TensorType& value = *t[1];
  if (value.dtype != x.dtype || !value.shape.empty() || !IsReplicated(value)) {
    return InvalidArgument(fmt::format("pad: the padding value must be a replicated {}[], got {}",
                                       DTypeName(x.dtype), Describe(value)));
  }
  const size_t n = x.shape.size();
  ATOLL_RETURN_IF_ERROR(NeedParamCount(op, 3 * n, "low, high, interior"));
  TensorType out = x;
  for (size_t d = 0; d < n; ++d) {
    const int64_t low = op.params[d], high = op.params[n + d], interior = op.params[2 * n + d];
    if (interior < 0) {
      return InvalidArgument(
          fmt::format("pad: dimension {}: interior padding {} must be >= 0", d, interior));
    }
    if (low != 0 || high != 0 || interior != 0) {
      ATOLL_RETURN_IF_ERROR(NeedUncut(op, x, d, "it is padded"));
    }
    const int64_t inner = x.shape[d] == 0 ? 0 : x.shape[d] + (x.shape[d] - 1) * interior;
    out.shape[d] = low + inner + high;
    if (out.shape[d] < 0) {
      return InvalidArgument(
          fmt::format("pad: dimension {} of {} would have size {} (low {}, high "
                      "{}, interior {})",
                      d, Describe(x), out.shape[d], low, high, interior));
    }
  }
  return out;
}

Result<TensorType> InferRev(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  const TensorType& x = *t[0];
  std::set<int64_t> seen;
  for (int64_t d : op.params) {
    if (d < 0 || d >= static_cast<int64_t>(x.shape.size()) || !seen.insert(d).second) {
      return InvalidArgument(fmt::format("rev: params [{}] must be distinct dimensions of {}",
                                         fmt::join(op.params, ","), Describe(x)));
    }
    ATOLL_RETURN_IF_ERROR(NeedUncut(op, x, static_cast<size_t>(d), "it is reversed"));
  }
  return x;
}

Result<TensorType> InferIota(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(const DType dtype, DTypeAttr(op, op.attr, "attr (the dtype)"));
  ATOLL_RETURN_IF_ERROR(NeedDType(op, TensorType{dtype, {}, {}}, kNumeric, "results"));
  if (op.params.empty()) return NeedParamCount(op, 1, "shape then dimension");
  const Shape shape(op.params.begin(), op.params.end() - 1);
  const int64_t dim = op.params.back();
  if (dim < 0 || dim >= static_cast<int64_t>(shape.size()) ||
      std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; })) {
    return InvalidArgument(
        fmt::format("iota: shape {} and dimension {}: the dimension must be "
                    "one of the shape's, the sizes >= 0",
                    ShapeString(shape), dim));
  }
  return TensorType{dtype, shape, std::vector<int32_t>(shape.size(), -1)};
}

Result<TensorType> InferFull(const FunctionDef& fn, const Op& op) {
  if (op.params.empty()) return NeedParamCount(op, 1, "the dtype's code then the shape");
  ATOLL_ASSIGN_OR_RETURN(const DType dtype,
                         DTypeAttr(op, static_cast<double>(op.params[0]), "params[0] (the dtype)"));
  const Shape shape(op.params.begin() + 1, op.params.end());
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; })) {
    return InvalidArgument(
        fmt::format("full: shape {} has a negative dimension", ShapeString(shape)));
  }
  // The value must be one the dtype holds (Tensor::FromDoubles' rule).
  const Result<Tensor> one = Tensor::FromDoubles(dtype, {}, {op.attr});
  if (!one.ok()) return one.status().WithContext("full");
  return TensorType{dtype, shape, std::vector<int32_t>(shape.size(), -1)};
}

}  // namespace atl::ir::internal
