// gather and scatter with XLA's semantics for jax.lax's dimension numbers (no batching
// dimensions): every result (or update) element found from its index, one element at a time.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include "common/base/dtype_types.h"
#include "kernels/check.h"
#include "kernels/lax.h"
#include "kernels/nd_index.h"
#include "kernels/wrapping.h"

namespace atl::kernels {

namespace {

bool Contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

int64_t IndexAt(const Tensor& indices, int64_t i) {
  return indices.dtype() == DType::kI32 ? indices.as<int32_t>()[i] : indices.as<int64_t>()[i];
}

using internal::NextIndex;
using internal::RowMajorStrides;

// jax's fill value of a gather in mode fill: NaN, the signed minimum, the unsigned maximum,
// true.
void WriteFill(DType dtype, std::byte* at) {
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    T v{};
    if constexpr (std::is_same_v<T, bool>) {
      v = true;
    } else if constexpr (std::is_floating_point_v<T>) {
      v = std::numeric_limits<T>::quiet_NaN();
    } else if constexpr (std::is_integral_v<T>) {
      v = std::is_signed_v<T> ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
    }
    std::memcpy(at, &v, sizeof(T));
  });
}

// The starts of a window in the operand: the index vector at batch position `batch` of
// `indices` placed on the operand's dimensions by `map`, clamped (or checked) so that a
// window of `window` fits. False when a start does not fit and `clamp` is off.
bool Starts(const Tensor& indices, int64_t batch, const std::vector<int64_t>& map,
            const Shape& operand, const std::vector<int64_t>& window, bool clamp,
            std::vector<int64_t>& starts) {
  std::fill(starts.begin(), starts.end(), 0);
  const auto n = static_cast<int64_t>(map.size());
  for (int64_t k = 0; k < n; ++k) {
    const int64_t d = map[k];
    const int64_t limit = operand[d] - window[d];
    const int64_t s = IndexAt(indices, batch * n + k);
    if (s < 0 || s > limit) {
      if (!clamp) return false;
      starts[d] = std::clamp<int64_t>(s, 0, limit);
    } else {
      starts[d] = s;
    }
  }
  return true;
}

template <typename T>
T CombineScatter(ScatterFn fn, T old, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (fn) {
      case ScatterFn::kAdd:
      case ScatterFn::kMax:
        return old || v;
      case ScatterFn::kMul:
      case ScatterFn::kMin:
        return old && v;
      case ScatterFn::kReplace:
        return v;
    }
    return v;
  } else {
    switch (fn) {
      case ScatterFn::kReplace:
        return v;
      case ScatterFn::kAdd:
        return internal::WrappingAdd(old, v);
      case ScatterFn::kMul:
        return internal::WrappingMul(old, v);
      case ScatterFn::kMin:
      case ScatterFn::kMax:
        if constexpr (std::is_floating_point_v<T>) {
          if (old != old || v != v) return std::numeric_limits<T>::quiet_NaN();
        }
        return fn == ScatterFn::kMax ? std::max(old, v) : std::min(old, v);
    }
    return v;
  }
}

}  // namespace

Result<Tensor> Gather(const Tensor& operand, const Tensor& indices, const GatherDims& dims,
                      const Shape& out_shape, bool fill) {
  const Shape& shape = operand.shape();
  const size_t rank = shape.size();
  if (dims.slice_sizes.size() != rank || indices.shape().empty()) {
    return InvalidArgument(fmt::format("gather: {} with indices {}", internal::Describe(operand),
                                       internal::Describe(indices)));
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(operand.dtype(), out_shape));
  const size_t size = DTypeSize(operand.dtype());
  const std::vector<int64_t> strides = RowMajorStrides(shape);
  // The batch dimensions of the result in order, and the operand dimension each offset
  // dimension walks.
  std::vector<int64_t> batch_dims, window_dims;
  for (size_t i = 0; i < out_shape.size(); ++i) {
    if (!Contains(dims.offset_dims, static_cast<int64_t>(i))) batch_dims.push_back(i);
  }
  for (size_t d = 0; d < rank; ++d) {
    if (!Contains(dims.collapsed_slice_dims, static_cast<int64_t>(d))) window_dims.push_back(d);
  }
  const Shape batch_shape(indices.shape().begin(), indices.shape().end() - 1);
  const std::vector<int64_t> batch_strides = RowMajorStrides(batch_shape);
  std::vector<int64_t> index(out_shape.size(), 0), starts(rank, 0);
  const int64_t n = out.num_elements();
  for (int64_t i = 0; i < n; ++i, NextIndex(index, out_shape)) {
    int64_t batch = 0;
    for (size_t b = 0; b < batch_dims.size(); ++b) batch += index[batch_dims[b]] * batch_strides[b];
    std::byte* to = out.data() + i * size;
    if (!Starts(indices, batch, dims.start_index_map, shape, dims.slice_sizes, !fill, starts)) {
      WriteFill(operand.dtype(), to);
      continue;
    }
    int64_t at = 0;
    for (size_t d = 0; d < rank; ++d) at += starts[d] * strides[d];
    for (size_t w = 0; w < window_dims.size(); ++w) {
      at += index[dims.offset_dims[w]] * strides[window_dims[w]];
    }
    std::memcpy(to, operand.data() + at * size, size);
  }
  return out;
}

Result<Tensor> Scatter(ScatterFn fn, const Tensor& operand, const Tensor& indices,
                       const Tensor& updates, const ScatterDims& dims, bool drop) {
  const Shape& shape = operand.shape();
  const size_t rank = shape.size();
  if (indices.shape().empty() || updates.dtype() != operand.dtype()) {
    return InvalidArgument(fmt::format("scatter: {} into {} at {}", internal::Describe(updates),
                                       internal::Describe(operand), internal::Describe(indices)));
  }
  Tensor out = operand;
  const std::vector<int64_t> strides = RowMajorStrides(shape);
  std::vector<int64_t> scatter_dims, window_operand_dims;
  for (size_t i = 0; i < updates.shape().size(); ++i) {
    if (!Contains(dims.update_window_dims, static_cast<int64_t>(i))) scatter_dims.push_back(i);
  }
  for (size_t d = 0; d < rank; ++d) {
    if (!Contains(dims.inserted_window_dims, static_cast<int64_t>(d))) {
      window_operand_dims.push_back(d);
    }
  }
  // The window's size along each operand dimension (1 where inserted).
  std::vector<int64_t> window(rank, 1);
  for (size_t w = 0; w < window_operand_dims.size(); ++w) {
    window[window_operand_dims[w]] = updates.shape()[dims.update_window_dims[w]];
  }
  const Shape batch_shape(indices.shape().begin(), indices.shape().end() - 1);
  const std::vector<int64_t> batch_strides = RowMajorStrides(batch_shape);
  std::vector<int64_t> index(updates.shape().size(), 0), starts(rank, 0);
  Status status = Status::Ok();
  VisitDType(operand.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, BF16> || std::is_same_v<T, F16>) {
      status = InvalidArgument("scatter takes no storage dtype: it is computed in f32");
    } else {
      T* dst = out.as<T>().data();
      const T* src = updates.as<T>().data();
      const int64_t n = updates.num_elements();
      for (int64_t i = 0; i < n; ++i, NextIndex(index, updates.shape())) {
        int64_t batch = 0;
        for (size_t b = 0; b < scatter_dims.size(); ++b) {
          batch += index[scatter_dims[b]] * batch_strides[b];
        }
        if (!Starts(indices, batch, dims.scatter_dims_to_operand_dims, shape, window, !drop,
                    starts)) {
          continue;  // the whole window is dropped
        }
        int64_t at = 0;
        for (size_t d = 0; d < rank; ++d) at += starts[d] * strides[d];
        for (size_t w = 0; w < window_operand_dims.size(); ++w) {
          at += index[dims.update_window_dims[w]] * strides[window_operand_dims[w]];
        }
        dst[at] = CombineScatter(fn, dst[at], src[i]);
      }
    }
  });
  ATOLL_RETURN_IF_ERROR(status);
  return out;
}

}  // namespace atl::kernels
