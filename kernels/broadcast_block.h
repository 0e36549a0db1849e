// Reading a broadcast operand block by block (a fused expression's kBroadcast node): the
// values of broadcast_in_dim(x) at a run of the result's row-major positions, gathered from
// x in place, so that no tensor of the result's size is made. Internal to the kernel library.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "atoll/tensor.h"
#include "kernels/nd_index.h"

namespace atl::kernels::internal {

// Per dimension of `to`, the stride in x (of `from`'s shape) that a step along it takes:
// x's dimension i is to's dims[i], of the same size or 1 (stride 0: repeated); the others
// are 0. nullopt when `dims` does not place `from` in `to` that way.
inline std::optional<std::vector<int64_t>> BroadcastStrides(const Shape& from, const Shape& to,
                                                            const std::vector<int64_t>& dims) {
  if (dims.size() != from.size()) return std::nullopt;
  const std::vector<int64_t> x_strides = RowMajorStrides(from);
  std::vector<int64_t> strides(to.size(), 0);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(to.size()) ||
        (from[i] != 1 && from[i] != to[dims[i]])) {
      return std::nullopt;
    }
    if (from[i] != 1) strides[dims[i]] = x_strides[i];
  }
  return strides;
}

// dst[0, len) = the broadcast values at the result's positions [base, base + len): runs
// along the innermost dimension are fills (stride 0), copies (1) or strided reads.
template <typename T>
void GatherBlock(const T* x, const Shape& shape, const std::vector<int64_t>& strides, int64_t base,
                 int64_t len, T* dst) {
  const size_t rank = shape.size();
  if (rank == 0) {
    std::fill_n(dst, len, x[0]);
    return;
  }
  std::vector<int64_t> index(rank);
  int64_t from = 0;
  for (size_t d = rank, rest = static_cast<size_t>(base); d-- > 0;) {
    index[d] = static_cast<int64_t>(rest % static_cast<size_t>(shape[d]));
    rest /= static_cast<size_t>(shape[d]);
    from += index[d] * strides[d];
  }
  const int64_t inner = shape[rank - 1], step = strides[rank - 1];
  for (int64_t done = 0; done < len;) {
    const int64_t run = std::min(inner - index[rank - 1], len - done);
    if (step == 0) {
      std::fill_n(dst + done, run, x[from]);
    } else if (step == 1) {
      std::memcpy(dst + done, x + from, static_cast<size_t>(run) * sizeof(T));
    } else {
      for (int64_t i = 0; i < run; ++i) dst[done + i] = x[from + i * step];
    }
    done += run;
    from += run * step;
    index[rank - 1] += run;
    if (index[rank - 1] < inner) continue;  // the block ended inside this run
    from -= inner * step;
    index[rank - 1] = 0;
    for (size_t d = rank - 1; d-- > 0;) {  // the next outer index
      from += strides[d];
      if (++index[d] < shape[d]) break;
      from -= strides[d] * shape[d];
      index[d] = 0;
    }
  }
}

}  // namespace atl::kernels::internal
