// The type rules of gather and scatter: XLA's shape rules for jax.lax's dimension numbers
// (without batching dimensions), and the shardings under which a shard's result is its block.
#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/ir/type_rules.h"

namespace atl::ir::internal {

namespace {

// "dimension D is cut along mesh axis A", of the first cut dimension of t, for refusals.
std::string FirstCut(const TensorType& t) {
  for (size_t d = 0; d < t.split.size(); ++d) {
    if (t.split[d] >= 0) {
      return fmt::format("dimension {} is cut along mesh axis {}", d, t.split[d]);
    }
  }
  return "value is replicated";
}

Status NeedSortedDims(const Op& op, const std::vector<int64_t>& dims, size_t rank,
                      std::string_view what) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(rank) || (i > 0 && dims[i] <= dims[i - 1])) {
      return InvalidArgument(fmt::format("{}: {} [{}] must be increasing dimensions below {}",
                                         OpName(op.code), what, fmt::join(dims, ","), rank));
    }
  }
  return Status::Ok();
}

Status NeedIndices(const Op& op, const TensorType& indices, size_t index_size) {
  if ((indices.dtype != DType::kI32 && indices.dtype != DType::kI64) || indices.shape.empty() ||
      indices.shape.back() != static_cast<int64_t>(index_size)) {
    return InvalidArgument(
        fmt::format("{}: indices must be i32 or i64 whose last dimension holds "
                    "the {} start indices, got {}",
                    OpName(op.code), index_size, Describe(indices)));
  }
  if (indices.split.back() >= 0) {
    return InvalidArgument(fmt::format("{}: the index vector dimension of {} must not be cut",
                                       OpName(op.code), Describe(indices)));
  }
  return Status::Ok();
}

Status NeedMode(const Op& op) {
  if (op.attr == 0 || op.attr == 1) return Status::Ok();
  return InvalidArgument(fmt::format("{}: attr (the mode) must be 0 (clip) or 1 (fill), got {}",
                                     OpName(op.code), op.attr));
}

}  // namespace

Result<IndexedDims> ReadIndexedDims(const Op& op, size_t lists) {
  IndexedDims out;
  size_t at = 0;
  for (size_t l = 0; l < lists; ++l) {
    if (at >= op.params.size() || op.params[at] < 0 ||
        op.params.size() - at - 1 < static_cast<size_t>(op.params[at])) {
      return InvalidArgument(fmt::format("{}: params [{}] end before list {} of {}",
                                         OpName(op.code), fmt::join(op.params, ","), l, lists));
    }
    const auto n = static_cast<size_t>(op.params[at]);
    out.lists.emplace_back(op.params.begin() + at + 1, op.params.begin() + at + 1 + n);
    at += 1 + n;
  }
  out.rest.assign(op.params.begin() + at, op.params.end());
  return out;
}

Result<TensorType> InferGather(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2));
  const TensorType& operand = *t[0];
  const TensorType& indices = *t[1];
  ATOLL_RETURN_IF_ERROR(NeedMode(op));
  ATOLL_ASSIGN_OR_RETURN(IndexedDims dims, ReadIndexedDims(op, 3));
  const auto& [offset_dims, collapsed, start_map] =
      std::tie(dims.lists[0], dims.lists[1], dims.lists[2]);
  const std::vector<int64_t>& sizes = dims.rest;
  const size_t rank = operand.shape.size();
  if (sizes.size() != rank) {
    return InvalidArgument(
        fmt::format("gather: slice_sizes [{}] need one size per dimension of "
                    "{}",
                    fmt::join(sizes, ","), Describe(operand)));
  }
  ATOLL_RETURN_IF_ERROR(NeedIndices(op, indices, start_map.size()));
  ATOLL_RETURN_IF_ERROR(NeedSortedDims(op, collapsed, rank, "collapsed_slice_dims"));
  std::set<int64_t> mapped;
  for (int64_t d : start_map) {
    if (d < 0 || d >= static_cast<int64_t>(rank) || !mapped.insert(d).second) {
      return InvalidArgument(
          fmt::format("gather: start_index_map [{}] must be distinct "
                      "dimensions of {}",
                      fmt::join(start_map, ","), Describe(operand)));
    }
  }
  for (size_t d = 0; d < rank; ++d) {
    if (sizes[d] < 0 || sizes[d] > operand.shape[d]) {
      return InvalidArgument(fmt::format("gather: slice size {} of dimension {} must be in [0, {}]",
                                         sizes[d], d, operand.shape[d]));
    }
  }
  for (int64_t d : collapsed) {
    if (sizes[d] != 1) {
      return InvalidArgument(
          fmt::format("gather: collapsed dimension {} must have slice size 1, "
                      "got {}",
                      d, sizes[d]));
    }
  }
  const size_t batch_rank = indices.shape.size() - 1;
  const size_t out_rank = batch_rank + offset_dims.size();
  ATOLL_RETURN_IF_ERROR(NeedSortedDims(op, offset_dims, out_rank, "offset_dims"));
  if (offset_dims.size() != rank - collapsed.size()) {
    return InvalidArgument(
        fmt::format("gather: {} offset_dims for the {} dimensions of {} that "
                    "are not collapsed",
                    offset_dims.size(), rank - collapsed.size(), Describe(operand)));
  }
  if (!IsReplicated(operand)) {
    return InvalidArgument(
        fmt::format("gather: the operand must be replicated (every device gathers from the "
                    "whole of it), but its {}: {}",
                    FirstCut(operand), Describe(operand)));
  }
  TensorType out{operand.dtype, Shape(out_rank), std::vector<int32_t>(out_rank, -1)};
  size_t next_batch = 0, next_offset = 0;
  std::vector<int64_t> window;  // the slice sizes of the dimensions not collapsed
  for (size_t d = 0; d < rank; ++d) {
    if (std::find(collapsed.begin(), collapsed.end(), static_cast<int64_t>(d)) == collapsed.end()) {
      window.push_back(sizes[d]);
    }
  }
  for (size_t i = 0; i < out_rank; ++i) {
    if (std::find(offset_dims.begin(), offset_dims.end(), static_cast<int64_t>(i)) !=
        offset_dims.end()) {
      out.shape[i] = window[next_offset++];
    } else {
      out.shape[i] = indices.shape[next_batch];
      out.split[i] = indices.split[next_batch];  // each device gathers its rows
      ++next_batch;
    }
  }
  return out;
}

Result<TensorType> InferScatter(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 3));
  const TensorType& operand = *t[0];
  const TensorType& indices = *t[1];
  const TensorType& updates = *t[2];
  ATOLL_RETURN_IF_ERROR(NeedMode(op));
  if (op.code != OpCode::kScatter) {
    const DTypeSet takes = op.code == OpCode::kScatterAdd || op.code == OpCode::kScatterMul
                               ? kNumeric
                               : kNumeric | kBoolSet;
    ATOLL_RETURN_IF_ERROR(NeedDType(op, operand, takes, "operand"));
  }
  ATOLL_ASSIGN_OR_RETURN(IndexedDims dims, ReadIndexedDims(op, 3));
  if (!dims.rest.empty()) {
    return InvalidArgument(fmt::format("{}: params [{}] hold more than the three lists",
                                       OpName(op.code), fmt::join(op.params, ",")));
  }
  const auto& [window_dims, inserted, to_operand] =
      std::tie(dims.lists[0], dims.lists[1], dims.lists[2]);
  const size_t rank = operand.shape.size();
  if (updates.dtype != operand.dtype) {
    return InvalidArgument(fmt::format("{}: updates {} must have the dtype of {}", OpName(op.code),
                                       Describe(updates), Describe(operand)));
  }
  ATOLL_RETURN_IF_ERROR(NeedIndices(op, indices, to_operand.size()));
  ATOLL_RETURN_IF_ERROR(NeedSortedDims(op, inserted, rank, "inserted_window_dims"));
  ATOLL_RETURN_IF_ERROR(
      NeedSortedDims(op, window_dims, updates.shape.size(), "update_window_dims"));
  std::set<int64_t> mapped;
  for (int64_t d : to_operand) {
    if (d < 0 || d >= static_cast<int64_t>(rank) || !mapped.insert(d).second) {
      return InvalidArgument(
          fmt::format("{}: scatter_dims_to_operand_dims [{}] must be distinct "
                      "dimensions of {}",
                      OpName(op.code), fmt::join(to_operand, ","), Describe(operand)));
    }
  }
  const size_t batch_rank = indices.shape.size() - 1;
  if (window_dims.size() + inserted.size() != rank ||
      updates.shape.size() != batch_rank + window_dims.size()) {
    return InvalidArgument(
        fmt::format("{}: updates {} do not fit operand {} and indices {} with "
                    "{} window and {} inserted dimensions",
                    OpName(op.code), Describe(updates), Describe(operand), Describe(indices),
                    window_dims.size(), inserted.size()));
  }
  // The update's window sizes, in order, against the operand's dimensions not inserted; its
  // scatter dimensions, in order, against the indices' batch dimensions.
  size_t next_window = 0, next_batch = 0;
  std::vector<int64_t> operand_window;
  for (size_t d = 0; d < rank; ++d) {
    if (std::find(inserted.begin(), inserted.end(), static_cast<int64_t>(d)) == inserted.end()) {
      operand_window.push_back(operand.shape[d]);
    }
  }
  for (size_t i = 0; i < updates.shape.size(); ++i) {
    const bool in_window = std::find(window_dims.begin(), window_dims.end(),
                                     static_cast<int64_t>(i)) != window_dims.end();
    const int64_t limit = in_window ? operand_window[next_window++] : indices.shape[next_batch++];
    if (in_window ? updates.shape[i] > limit : updates.shape[i] != limit) {
      return InvalidArgument(
          fmt::format("{}: dimension {} of updates {} is {}, which does not fit "
                      "{}",
                      OpName(op.code), i, Describe(updates), updates.shape[i], limit));
    }
  }
  const std::pair<const char*, const TensorType*> parts[] = {
      {"operand", &operand}, {"indices", &indices}, {"updates", &updates}};
  for (const auto& [name, part] : parts) {
    if (IsReplicated(*part)) continue;
    return InvalidArgument(
        fmt::format("{}: operand, indices and updates must be replicated, but in the {}, {}; got "
                    "{}, {} and {}",
                    OpName(op.code), name, FirstCut(*part), Describe(operand), Describe(indices),
                    Describe(updates)));
  }
  return operand;
}

}  // namespace atl::ir::internal
