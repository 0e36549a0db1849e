// Windowed kernels: reduce_window, select_and_scatter_add, conv_general_dilated (oneDNN's
// where it takes the case, conv_onednn.cc; else direct loops over any dimension numbers,
// products summed in double), and reduce_precision.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include <fmt/format.h>

#include "common/base/dtype_types.h"
#include "kernels/lax.h"
#include "kernels/nd_index.h"
#include "kernels/wrapping.h"

namespace atl::kernels {

namespace {

int64_t ElementCount(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t WindowedSize(int64_t in, int64_t size, int64_t stride, int64_t low, int64_t high,
                     int64_t base_dilation, int64_t window_dilation) {
  const int64_t padded = (in == 0 ? 0 : (in - 1) * base_dilation + 1) + low + high;
  const int64_t span = (size - 1) * window_dilation + 1;
  return padded < span ? 0 : (padded - span) / stride + 1;
}

Status CheckWindow(const Window& w, size_t rank, std::string_view what) {
  for (const auto* v :
       {&w.size, &w.stride, &w.low, &w.high, &w.base_dilation, &w.window_dilation}) {
    if (v->size() != rank) {
      return InvalidArgument(
          fmt::format("{}: the window has {} dimensions, x {}", what, v->size(), rank));
    }
  }
  return Status::Ok();
}

Shape WindowedShape(const Shape& in, const Window& w) {
  Shape out(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    out[d] = WindowedSize(in[d], w.size[d], w.stride[d], w.low[d], w.high[d], w.base_dilation[d],
                          w.window_dilation[d]);
  }
  return out;
}

// Calls f(flat position in x) for each element of the window at output `out` that falls on x
// (not on padding or between dilated elements), in the window's row-major order; `on_pad`
// for the others.
template <typename F, typename G>
void ForWindow(const std::vector<int64_t>& out, const Shape& x, const std::vector<int64_t>& xs,
               const Window& w, F&& f, G&& on_pad) {
  std::vector<int64_t> k(out.size(), 0);
  const Shape window(w.size.begin(), w.size.end());
  do {
    int64_t flat = 0;
    bool inside = true;
    for (size_t d = 0; d < out.size() && inside; ++d) {
      const int64_t p = out[d] * w.stride[d] + k[d] * w.window_dilation[d] - w.low[d];
      if (p < 0 || p % w.base_dilation[d] != 0 || p / w.base_dilation[d] >= x[d]) {
        inside = false;
      } else {
        flat += p / w.base_dilation[d] * xs[d];
      }
    }
    if (inside) {
      f(flat);
    } else {
      on_pad();
    }
  } while (internal::NextIndex(k, window));
}

template <typename T>
T Lowest() {
  if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::lowest();
}
template <typename T>
T Highest() {
  if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::max();
}

// One element `v` into a window's accumulator `acc`: a sum (wrapping, for integers), or a max
// or min that a NaN wins.
template <typename T>
T Accumulate(WindowFn fn, T acc, T v) {
  if (fn == WindowFn::kSum) return internal::WrappingAdd(acc, v);
  if (fn == WindowFn::kMax) return (std::is_floating_point_v<T> && v != v) || v > acc ? v : acc;
  return (std::is_floating_point_v<T> && v != v) || v < acc ? v : acc;
}

template <typename T>
T Identity(WindowFn fn) {
  return fn == WindowFn::kSum ? T{0} : fn == WindowFn::kMax ? Lowest<T>() : Highest<T>();
}

// A window over the last two dimensions alone (pooling an image's height and width: every
// other dimension of size 1, stride 1 and no padding), without dilation.
bool PoolsPlanes(const Window& w) {
  const size_t n = w.size.size();
  if (n < 2) return false;
  for (size_t d = 0; d < n; ++d) {
    if (w.base_dilation[d] != 1 || w.window_dilation[d] != 1) return false;
    if (d + 2 < n && (w.size[d] != 1 || w.stride[d] != 1 || w.low[d] != 0 || w.high[d] != 0)) {
      return false;
    }
  }
  return true;
}

// ReduceWindow of such a window, plane by plane with the window's bounds clipped to the
// plane: the general walk's index arithmetic per element (ForWindow) was a quarter of
// resnet18's time at batch 16, in its one max pooling. The same elements in the same order.
template <typename T>
void PoolPlanes(WindowFn fn, const T* in, T* out, const Shape& x, const Shape& out_shape,
                const Window& w) {
  const size_t n = x.size();
  const int64_t h = x[n - 2], wd = x[n - 1], oh = out_shape[n - 2], ow = out_shape[n - 1];
  const int64_t kh = w.size[n - 2], kw = w.size[n - 1], sh = w.stride[n - 2], sw = w.stride[n - 1],
                ph = w.low[n - 2], pw = w.low[n - 1];
  int64_t planes = 1;
  for (size_t d = 0; d + 2 < n; ++d) planes *= x[d];
  for (int64_t p = 0; p < planes; ++p) {
    const T* plane = in + p * h * wd;
    T* o = out + p * oh * ow;
    for (int64_t i = 0; i < oh; ++i) {
      const int64_t y0 = i * sh - ph;
      const int64_t ylo = std::max<int64_t>(y0, 0), yhi = std::min(y0 + kh, h);
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t x0 = j * sw - pw;
        const int64_t xlo = std::max<int64_t>(x0, 0), xhi = std::min(x0 + kw, wd);
        T acc = Identity<T>(fn);
        for (int64_t y = ylo; y < yhi; ++y) {
          for (int64_t c = xlo; c < xhi; ++c) acc = Accumulate(fn, acc, plane[y * wd + c]);
        }
        o[i * ow + j] = acc;
      }
    }
  }
}

}  // namespace

Result<Tensor> ReduceWindow(WindowFn fn, const Tensor& x, const Window& w) {
  ATOLL_RETURN_IF_ERROR(CheckWindow(w, x.shape().size(), "reduce_window"));
  const Shape out_shape = WindowedShape(x.shape(), w);
  Tensor out(x.dtype(), out_shape);
  if (ElementCount(out_shape) == 0) return out;
  const std::vector<int64_t> xs = internal::RowMajorStrides(x.shape());
  Status status = Status::Ok();
  VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, bool> || !std::is_arithmetic_v<T>) {
      status = InvalidArgument(fmt::format("reduce_window does not take {}", DTypeName(x.dtype())));
    } else {
      const auto in = x.as<T>();
      auto result = out.as<T>();
      if (PoolsPlanes(w)) {
        PoolPlanes(fn, in.data(), result.data(), x.shape(), out_shape, w);
        return;
      }
      std::vector<int64_t> index(out_shape.size(), 0);
      int64_t i = 0;
      do {
        T acc = Identity<T>(fn);
        ForWindow(
            index, x.shape(), xs, w,
            [&](int64_t at) { acc = Accumulate(fn, acc, in[static_cast<size_t>(at)]); }, [] {});
        result[static_cast<size_t>(i++)] = acc;
      } while (internal::NextIndex(index, out_shape));
    }
  });
  if (!status.ok()) return status;
  return out;
}

Result<Tensor> SelectAndScatterAdd(const Tensor& source, const Tensor& x, const Window& w,
                                   bool ge) {
  ATOLL_RETURN_IF_ERROR(CheckWindow(w, x.shape().size(), "select_and_scatter_add"));
  const Shape windows = WindowedShape(x.shape(), w);
  if (source.shape() != windows || source.dtype() != x.dtype()) {
    return InvalidArgument(fmt::format(
        "select_and_scatter_add: the source must be {}{}, one value per window, got {}{}",
        DTypeName(x.dtype()), ShapeString(windows), DTypeName(source.dtype()),
        ShapeString(source.shape())));
  }
  Tensor out(x.dtype(), x.shape());
  std::memset(out.data(), 0, out.nbytes());
  if (ElementCount(windows) == 0) return out;
  const std::vector<int64_t> xs = internal::RowMajorStrides(x.shape());
  Status status = Status::Ok();
  VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_floating_point_v<T>) {
      status = InvalidArgument(
          fmt::format("select_and_scatter_add takes f32 or f64, got {}", DTypeName(x.dtype())));
    } else {
      const auto in = x.as<T>();
      const auto src = source.as<T>();
      auto result = out.as<T>();
      std::vector<int64_t> index(windows.size(), 0);
      int64_t i = 0;
      do {
        // The first element in window order is selected, then each later one replaces it
        // unless select(current, it) holds; padding is never selected (XLA's
        // SelectAndScatter).
        int64_t chosen = -1;
        T best = T{0};
        bool first = true;
        auto visit = [&](int64_t at, T v) {
          if (first || !(ge ? best >= v : best <= v)) {
            best = v;
            chosen = at;
          }
          first = false;
        };
        ForWindow(
            index, x.shape(), xs, w, [&](int64_t at) { visit(at, in[static_cast<size_t>(at)]); },
            [] {});
        if (chosen >= 0) result[static_cast<size_t>(chosen)] += src[static_cast<size_t>(i)];
        ++i;
      } while (internal::NextIndex(index, windows));
    }
  });
  if (!status.ok()) return status;
  return out;
}

Result<Tensor> ConvGeneralDilated(const Tensor& lhs, const Tensor& rhs, const ConvDims& c,
                                  DType out_dtype) {
  const size_t n = c.strides.size();
  const size_t rank = n + 2;
  if (lhs.shape().size() != rank || rhs.shape().size() != rank || lhs.dtype() != rhs.dtype() ||
      c.lhs_spec.size() != rank || c.rhs_spec.size() != rank || c.out_spec.size() != rank) {
    return InvalidArgument(fmt::format("conv_general_dilated: lhs {}{} and rhs {}{} for n = {}",
                                       DTypeName(lhs.dtype()), ShapeString(lhs.shape()),
                                       DTypeName(rhs.dtype()), ShapeString(rhs.shape()), n));
  }
  auto at = [](const Shape& s, const std::vector<int64_t>& spec, size_t k) {
    return s[static_cast<size_t>(spec[k])];
  };
  const int64_t batch = at(lhs.shape(), c.lhs_spec, 0);
  const int64_t out_features = at(rhs.shape(), c.rhs_spec, 0);
  const int64_t in_per_group = at(rhs.shape(), c.rhs_spec, 1);
  const int64_t out_batch = batch / c.batch_groups;
  Shape out_shape(rank);
  out_shape[static_cast<size_t>(c.out_spec[0])] = out_batch;
  out_shape[static_cast<size_t>(c.out_spec[1])] = out_features;
  Shape spatial(n), kernel(n);
  for (size_t i = 0; i < n; ++i) {
    kernel[i] = at(rhs.shape(), c.rhs_spec, 2 + i);
    spatial[i] = WindowedSize(at(lhs.shape(), c.lhs_spec, 2 + i), kernel[i], c.strides[i], c.low[i],
                              c.high[i], c.lhs_dilation[i], c.rhs_dilation[i]);
    out_shape[static_cast<size_t>(c.out_spec[2 + i])] = spatial[i];
  }
  if (out_dtype != DType::kF64) {
    ATOLL_ASSIGN_OR_RETURN(std::optional<Tensor> fast, ConvWithOneDnn(lhs, rhs, c, out_shape));
    if (fast) return std::move(*fast);
  }
  const std::vector<int64_t> ls = internal::RowMajorStrides(lhs.shape()),
                             rs = internal::RowMajorStrides(rhs.shape()),
                             os = internal::RowMajorStrides(out_shape);
  const int64_t out_per_fgroup = out_features / c.feature_groups;
  const int64_t out_per_bgroup = out_features / c.batch_groups;
  std::vector<double> sums(static_cast<size_t>(ElementCount(out_shape)), 0.0);
  auto read = [](const Tensor& t) {
    std::vector<double> v(static_cast<size_t>(ElementCount(t.shape())));
    VisitDType(t.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const auto in = t.as<T>();
      for (size_t i = 0; i < v.size(); ++i) v[i] = ToDouble(in[i]);
    });
    return v;
  };
  const std::vector<double> l = read(lhs), r = read(rhs);
  if (!sums.empty()) {
    // One output position (b, o, spatial) at a time: its window over the input.
    std::vector<int64_t> pos(n + 2, 0);  // b, o, then spatial
    Shape walk = {out_batch, out_features};
    walk.insert(walk.end(), spatial.begin(), spatial.end());
    do {
      const int64_t b = pos[0], o = pos[1];
      const int64_t in_batch = b + (o / out_per_bgroup) * out_batch;
      const int64_t first_feature = (o / out_per_fgroup) * in_per_group;
      double acc = 0.0;
      std::vector<int64_t> k(n, 0);
      do {
        int64_t l_at = in_batch * ls[static_cast<size_t>(c.lhs_spec[0])];
        int64_t r_at = o * rs[static_cast<size_t>(c.rhs_spec[0])];
        bool inside = true;
        for (size_t i = 0; i < n && inside; ++i) {
          const int64_t p = pos[2 + i] * c.strides[i] + k[i] * c.rhs_dilation[i] - c.low[i];
          const int64_t size = at(lhs.shape(), c.lhs_spec, 2 + i);
          if (p < 0 || p % c.lhs_dilation[i] != 0 || p / c.lhs_dilation[i] >= size) {
            inside = false;
          } else {
            l_at += p / c.lhs_dilation[i] * ls[static_cast<size_t>(c.lhs_spec[2 + i])];
            r_at += k[i] * rs[static_cast<size_t>(c.rhs_spec[2 + i])];
          }
        }
        if (inside) {
          const int64_t l_step = ls[static_cast<size_t>(c.lhs_spec[1])];
          const int64_t r_step = rs[static_cast<size_t>(c.rhs_spec[1])];
          for (int64_t f = 0; f < in_per_group; ++f) {
            acc += l[static_cast<size_t>(l_at + (first_feature + f) * l_step)] *
                   r[static_cast<size_t>(r_at + f * r_step)];
          }
        }
      } while (n > 0 && internal::NextIndex(k, kernel));
      int64_t o_at =
          b * os[static_cast<size_t>(c.out_spec[0])] + o * os[static_cast<size_t>(c.out_spec[1])];
      for (size_t i = 0; i < n; ++i)
        o_at += pos[2 + i] * os[static_cast<size_t>(c.out_spec[2 + i])];
      sums[static_cast<size_t>(o_at)] = acc;
    } while (internal::NextIndex(pos, walk));
  }
  const DType computed = out_dtype == DType::kF64 ? DType::kF64 : DType::kF32;
  Tensor out(computed, out_shape);
  if (computed == DType::kF64) {
    std::memcpy(out.data(), sums.data(), out.nbytes());
  } else {
    auto o = out.as<float>();
    for (size_t i = 0; i < sums.size(); ++i) o[i] = static_cast<float>(sums[i]);
  }
  return out;
}

namespace {

// XLA's ReducePrecision on the bits of one float type (U its unsigned integer of its width).
template <typename F, typename U>
F ReducePrecisionOf(F x, int exponent_bits, int mantissa_bits) {
  constexpr int kBits = sizeof(F) * 8;
  constexpr int kMantissa = std::numeric_limits<F>::digits - 1;
  constexpr int kExponent = kBits - 1 - kMantissa;
  U bits = std::bit_cast<U>(x);
  if (mantissa_bits < kMantissa) {
    const int drop = kMantissa - mantissa_bits;
    const U last_kept = U{1} << drop;
    const U bias = ((last_kept >> 1) - 1) + ((bits & last_kept) >> drop);
    bits = (bits + bias) & ~(last_kept - 1);
  }
  if (exponent_bits < kExponent) {
    const U sign = U{1} << (kBits - 1);
    const U exponent_mask = ((U{1} << kExponent) - 1) << kMantissa;
    const int64_t bias = (int64_t{1} << (kExponent - 1)) - 1;
    const int64_t reduced_bias = (int64_t{1} << (exponent_bits - 1)) - 1;
    const U exponent = bits & exponent_mask;
    const auto max_exponent = static_cast<U>(bias + reduced_bias) << kMantissa;
    const auto min_exponent = static_cast<U>(bias - reduced_bias) << kMantissa;
    if (exponent > max_exponent) {
      bits = (bits & sign) | exponent_mask;
    } else if (exponent <= min_exponent) {
      bits = bits & sign;
    }
  }
  const F result = std::bit_cast<F>(bits);
  return std::isnan(x) ? x : result;
}

}  // namespace

Result<Tensor> ReducePrecision(const Tensor& x, int exponent_bits, int mantissa_bits) {
  if (exponent_bits < 1 || mantissa_bits < 0) {
    return InvalidArgument(fmt::format("reduce_precision: {} exponent and {} mantissa bits",
                                       exponent_bits, mantissa_bits));
  }
  Tensor out(x.dtype(), x.shape());
  if (x.dtype() == DType::kF32) {
    const auto in = x.as<float>();
    auto o = out.as<float>();
    for (size_t i = 0; i < in.size(); ++i) {
      o[i] = ReducePrecisionOf<float, uint32_t>(in[i], exponent_bits, mantissa_bits);
    }
  } else if (x.dtype() == DType::kF64) {
    const auto in = x.as<double>();
    auto o = out.as<double>();
    for (size_t i = 0; i < in.size(); ++i) {
      o[i] = ReducePrecisionOf<double, uint64_t>(in[i], exponent_bits, mantissa_bits);
    }
  } else {
    return InvalidArgument(
        fmt::format("reduce_precision takes f32 or f64, got {}", DTypeName(x.dtype())));
  }
  return out;
}

}  // namespace atl::kernels
