#include "kernels/collectives.h"

#include <new>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "common/base/dtype_types.h"
#include "kernels/binary_loop.h"
#include "kernels/check.h"
#include "kernels/shape_ops.h"

namespace atl::kernels {

using internal::Describe;

namespace {

// At least one shard, all well formed, and (with `same_shape`) all of shard 0's dtype and
// shape.
Status CheckShards(std::span<const Tensor> shards, std::string_view what, bool same_shape) {
  if (shards.empty()) return InvalidArgument(fmt::format("{} needs at least one shard", what));
  for (size_t i = 0; i < shards.size(); ++i) {
    ATOLL_RETURN_IF_ERROR(
        internal::CheckWellFormed(shards[i], fmt::format("{} shard {}", what, i)));
    const bool same = shards[i].dtype() == shards[0].dtype() &&
                      (!same_shape || shards[i].shape() == shards[0].shape());
    if (!same) {
      return InvalidArgument(fmt::format(
          "{}: shard {} is {}, expected {} like shard 0", what, i, Describe(shards[i]),
          same_shape ? Describe(shards[0]) : std::string(DTypeName(shards[0].dtype()))));
    }
  }
  return Status::Ok();
}

// The elementwise sum of the shards, added in shard order: f32 and f64 in their precision,
// bf16 and f16 in f32 and rounded once at the end, integers wrapping around.
Result<Tensor> Sum(std::span<const Tensor> shards) {
  const Tensor& first = shards[0];
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(first.dtype(), first.shape()));
  const int64_t n = first.num_elements();
  VisitDType(first.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (kIsHalf<T>) {
      std::vector<float> acc(static_cast<size_t>(n), 0.0f);
      for (const Tensor& s : shards) {
        const T* x = s.as<T>().data();
        for (int64_t i = 0; i < n; ++i) acc[i] += Widen(x[i]);
      }
      T* dst = out.as<T>().data();
      for (int64_t i = 0; i < n; ++i) dst[i] = Narrow<T>(acc[i]);
    } else {
      T* acc = out.as<T>().data();
      for (const Tensor& s : shards) {
        const T* x = s.as<T>().data();
        for (int64_t i = 0; i < n; ++i) acc[i] = internal::Add(acc[i], x[i]);
      }
    }
  });
  return out;
}

Result<std::vector<Tensor>> Copies(Tensor value, size_t count) {
  std::vector<Tensor> out;
  try {
    out.assign(count, value);
  } catch (const std::bad_alloc&) {
    return OutOfMemory(fmt::format("cannot copy {} to {} shards", Describe(value), count));
  }
  return out;
}

}  // namespace

Result<std::vector<Tensor>> AllReduceSum(std::span<const Tensor> shards) {
  ATOLL_RETURN_IF_ERROR(CheckShards(shards, "all-reduce sum", true));
  ATOLL_ASSIGN_OR_RETURN(Tensor sum, Sum(shards));
  return Copies(std::move(sum), shards.size());
}

Result<std::vector<Tensor>> AllGather(std::span<const Tensor> shards, int64_t axis) {
  ATOLL_RETURN_IF_ERROR(CheckShards(shards, "all-gather", false));
  auto gathered = Concat(shards, axis);
  if (!gathered.ok()) return gathered.status().WithContext("all-gather");
  return Copies(std::move(gathered).value(), shards.size());
}

Result<std::vector<Tensor>> ReduceScatter(std::span<const Tensor> shards, int64_t axis) {
  ATOLL_RETURN_IF_ERROR(CheckShards(shards, "reduce-scatter", true));
  if (shards[0].shape().empty()) {
    return InvalidArgument(
        fmt::format("reduce-scatter needs shards of rank >= 1, got {}", Describe(shards[0])));
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor sum, Sum(shards));
  auto pieces = Split(sum, axis, static_cast<int64_t>(shards.size()));
  if (!pieces.ok()) return pieces.status().WithContext("reduce-scatter");
  return pieces;
}

Result<std::vector<Tensor>> AllToAll(std::span<const Tensor> shards, int64_t split_axis,
                                     int64_t concat_axis) {
  ATOLL_RETURN_IF_ERROR(CheckShards(shards, "all-to-all", true));
  const size_t rank = shards[0].shape().size();
  ATOLL_RETURN_IF_ERROR(internal::NormalizeAxis(concat_axis, rank, "all-to-all concat").status());
  const size_t n = shards.size();
  // pieces[i][j]: what shard i sends to shard j.
  std::vector<std::vector<Tensor>> pieces;
  pieces.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    auto split = Split(shards[i], split_axis, static_cast<int64_t>(n));
    if (!split.ok()) return split.status().WithContext("all-to-all");
    pieces.push_back(std::move(split).value());
  }
  std::vector<Tensor> out;
  out.reserve(n);
  std::vector<Tensor> received(n);
  for (size_t j = 0; j < n; ++j) {
    for (size_t i = 0; i < n; ++i) received[i] = std::move(pieces[i][j]);
    ATOLL_ASSIGN_OR_RETURN(Tensor joined, Concat(received, concat_axis));
    out.push_back(std::move(joined));
  }
  return out;
}

}  // namespace atl::kernels
