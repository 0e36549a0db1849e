// The type rules of the windowed primitives: reduce_window_sum / max / min (pooling),
// select_and_scatter_add (max pooling's gradient), conv_general_dilated, and
// reduce_precision. A dimension the window slides along needs its neighbours' elements, so
// only dimensions the window leaves alone (window 1, stride 1, no padding or dilation: batch
// and channels) may be cut; conv takes its batch cut.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/ir/type_rules.h"

namespace atl::ir::internal {

namespace {

// One dimension of a window: its size, stride, padding and dilations.
struct WindowDim {
  int64_t size = 1, stride = 1, low = 0, high = 0, base_dilation = 1, window_dilation = 1;
  bool Trivial() const {
    return size == 1 && stride == 1 && low == 0 && high == 0 && base_dilation == 1 &&
           window_dilation == 1;
  }
};

// The size of the result along a dimension of `in` elements under `w`; InvalidArgument when
// its numbers are out of range.
Result<int64_t> WindowedSize(const Op& op, size_t d, int64_t in, const WindowDim& w,
                             bool negative_padding) {
  if (w.size < 1 || w.stride < 1 || w.base_dilation < 1 || w.window_dilation < 1 ||
      (!negative_padding && (w.low < 0 || w.high < 0))) {
    return InvalidArgument(fmt::format(
        "{}: dimension {}: window {}, stride {}, dilations {} and {} must be >= 1{}, got "
        "padding ({}, {})",
        OpName(op.code), d, w.size, w.stride, w.base_dilation, w.window_dilation,
        negative_padding ? "" : " and padding >= 0", w.low, w.high));
  }
  const int64_t dilated = in == 0 ? 0 : (in - 1) * w.base_dilation + 1;
  const int64_t padded = dilated + w.low + w.high;
  const int64_t span = (w.size - 1) * w.window_dilation + 1;
  if (padded < 0) {
    return InvalidArgument(
        fmt::format("{}: dimension {}: padding ({}, {}) removes more than its {}", OpName(op.code),
                    d, w.low, w.high, in));
  }
  return padded < span ? 0 : (padded - span) / w.stride + 1;
}

Status NeedParams(const Op& op, size_t want, std::string_view layout) {
  if (op.params.size() == want) return Status::Ok();
  return InvalidArgument(fmt::format("{}: params must be {} ({} values), got {}", OpName(op.code),
                                     layout, want, op.params.size()));
}

// params laid out as `fields` lists of n: window, strides, low, high[, base, window dilation].
std::vector<WindowDim> ReadWindow(const Op& op, size_t n, size_t fields, size_t at = 0) {
  std::vector<WindowDim> dims(n);
  for (size_t d = 0; d < n; ++d) {
    auto field = [&](size_t f) { return op.params[at + f * n + d]; };
    dims[d] = {field(0),
               field(1),
               field(2),
               field(3),
               fields > 4 ? field(4) : 1,
               fields > 5 ? field(5) : 1};
  }
  return dims;
}

Result<TensorType> Windowed(const Op& op, const TensorType& x, const std::vector<WindowDim>& w) {
  TensorType out = x;
  for (size_t d = 0; d < w.size(); ++d) {
    ATOLL_ASSIGN_OR_RETURN(out.shape[d], WindowedSize(op, d, x.shape[d], w[d], false));
    if (x.split[d] >= 0 && !w[d].Trivial()) {
      return InvalidArgument(fmt::format(
          "{}: dimension {} is cut along mesh axis {} and the window slides along it; gather "
          "it first (all_gather), got {}",
          OpName(op.code), d, x.split[d], Describe(x)));
    }
  }
  return out;
}

}  // namespace

Result<TensorType> InferReduceWindow(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  const TensorType& x = *t[0];
  ATOLL_RETURN_IF_ERROR(NeedDType(op, x, kNumeric));
  const size_t n = x.shape.size();
  ATOLL_RETURN_IF_ERROR(NeedParams(
      op, 6 * n, "window, strides, padding low, high, base and window dilation, each per dim"));
  return Windowed(op, x, ReadWindow(op, n, 6));
}

Result<TensorType> InferSelectAndScatterAdd(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2));
  const TensorType& source = *t[0];
  const TensorType& x = *t[1];
  ATOLL_RETURN_IF_ERROR(NeedDType(op, x, kFloats, "operand"));
  const size_t n = x.shape.size();
  ATOLL_RETURN_IF_ERROR(
      NeedParams(op, 4 * n + 1, "window, strides, padding low, high per dim, then select"));
  if (op.params[4 * n] != 0 && op.params[4 * n] != 1) {
    return InvalidArgument(
        fmt::format("select_and_scatter_add: select must be 0 (ge: max pooling) or 1 (le), got {}",
                    op.params[4 * n]));
  }
  ATOLL_ASSIGN_OR_RETURN(TensorType windows, Windowed(op, x, ReadWindow(op, n, 4)));
  if (source.dtype != x.dtype || source.shape != windows.shape || source.split != windows.split) {
    return InvalidArgument(
        fmt::format("select_and_scatter_add: the source must be one value per window, {}, got {}",
                    Describe(windows), Describe(source)));
  }
  return x;
}

Result<TensorType> InferConv(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 2));
  const TensorType& lhs = *t[0];
  const TensorType& rhs = *t[1];
  if (op.params.empty() || op.params[0] < 0 || op.params[0] > 3 ||
      op.params.size() != 9 + 8 * static_cast<size_t>(op.params[0])) {
    return InvalidArgument(fmt::format(
        "conv_general_dilated: params must be n (0 to 3 spatial dims), strides, padding low, "
        "high, lhs and rhs dilation (n each), lhs, rhs and out dimension numbers (n + 2 each), "
        "feature and batch group counts: 9 + 8n values, got [{}]",
        fmt::join(op.params, ",")));
  }
  const auto n = static_cast<size_t>(op.params[0]);
  ATOLL_RETURN_IF_ERROR(NeedDType(op, lhs, kFloats, "lhs"));
  if (rhs.dtype != lhs.dtype || lhs.shape.size() != n + 2 || rhs.shape.size() != n + 2) {
    return InvalidArgument(fmt::format(
        "conv_general_dilated: lhs and rhs of one dtype and rank {} (n = {}), got {} and {}", n + 2,
        n, Describe(lhs), Describe(rhs)));
  }
  auto spec = [&](size_t k) {
    const size_t at = 1 + 5 * n + k * (n + 2);
    return std::vector<int64_t>(op.params.begin() + static_cast<ptrdiff_t>(at),
                                op.params.begin() + static_cast<ptrdiff_t>(at + n + 2));
  };
  const std::vector<int64_t> lhs_spec = spec(0), rhs_spec = spec(1), out_spec = spec(2);
  for (const auto* s : {&lhs_spec, &rhs_spec, &out_spec}) {
    std::vector<bool> seen(n + 2);
    for (int64_t d : *s) {
      if (d < 0 || static_cast<size_t>(d) >= n + 2 || seen[static_cast<size_t>(d)]) {
        return InvalidArgument(fmt::format(
            "conv_general_dilated: dimension numbers [{}] must be a permutation of 0..{}",
            fmt::join(*s, ","), n + 1));
      }
      seen[static_cast<size_t>(d)] = true;
    }
  }
  const int64_t groups = op.params[1 + 5 * n + 3 * (n + 2)];
  const int64_t batch_groups = op.params[2 + 5 * n + 3 * (n + 2)];
  auto dim = [](const TensorType& x, const std::vector<int64_t>& s, size_t k) {
    return x.shape[static_cast<size_t>(s[k])];
  };
  const int64_t batch = dim(lhs, lhs_spec, 0), features = dim(lhs, lhs_spec, 1);
  const int64_t out_features = dim(rhs, rhs_spec, 0), in_features = dim(rhs, rhs_spec, 1);
  if (groups < 1 || batch_groups < 1 || (groups > 1 && batch_groups > 1) ||
      features != in_features * groups || out_features % groups != 0 || batch % batch_groups != 0 ||
      out_features % batch_groups != 0) {
    return InvalidArgument(fmt::format(
        "conv_general_dilated: {} input features must be rhs's {} times the feature group count "
        "{}, and the batch {} and the {} output features divide by the group counts ({} and {}, "
        "not both > 1)",
        features, in_features, groups, batch, out_features, groups, batch_groups));
  }
  ATOLL_ASSIGN_OR_RETURN(DType dtype, op.attr == -1 ? Result<DType>(lhs.dtype)
                                                    : DTypeAttr(op, op.attr, "preferred type"));
  if ((SetOf(dtype) & kFloats) == 0) {
    return InvalidArgument(
        fmt::format("conv_general_dilated: preferred type {} is not a float", DTypeName(dtype)));
  }
  TensorType out{dtype, Shape(n + 2), std::vector<int32_t>(n + 2, -1)};
  out.shape[static_cast<size_t>(out_spec[0])] = batch / batch_groups;
  out.shape[static_cast<size_t>(out_spec[1])] = out_features;
  for (size_t i = 0; i < n; ++i) {
    auto field = [&](size_t f) { return op.params[1 + f * n + i]; };
    const WindowDim w{dim(rhs, rhs_spec, 2 + i), field(0), field(1), field(2), field(3), field(4)};
    ATOLL_ASSIGN_OR_RETURN(out.shape[static_cast<size_t>(out_spec[2 + i])],
                           WindowedSize(op, i, dim(lhs, lhs_spec, 2 + i), w, true));
  }
  for (size_t d = 0; d < rhs.split.size(); ++d) {
    if (rhs.split[d] < 0) continue;
    return InvalidArgument(fmt::format(
        "conv_general_dilated: the kernel (rhs) must be replicated, but its dimension {} is "
        "cut along mesh axis {}: {}",
        d, rhs.split[d], Describe(rhs)));
  }
  for (size_t d = 0; d < n + 2; ++d) {
    if (lhs.split[d] < 0) continue;
    if (d != static_cast<size_t>(lhs_spec[0]) || batch_groups != 1) {
      return InvalidArgument(fmt::format(
          "conv_general_dilated: lhs dimension {} is cut along mesh axis {}; only the batch "
          "dimension may be cut (and not with a batch group count), got {}",
          d, lhs.split[d], Describe(lhs)));
    }
    out.split[static_cast<size_t>(out_spec[0])] = lhs.split[d];
  }
  return out;
}

Result<TensorType> InferReducePrecision(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors(fn, op, 1));
  ATOLL_RETURN_IF_ERROR(NeedDType(op, *t[0], kFloats));
  if (op.params.size() != 2 || op.params[0] < 1 || op.params[1] < 0) {
    return InvalidArgument(fmt::format(
        "reduce_precision: params must be exponent bits (>= 1) and mantissa bits (>= 0), got "
        "[{}]",
        fmt::join(op.params, ",")));
  }
  return *t[0];
}

}  // namespace atl::ir::internal
