// The kernels of the jax.lax primitives (common/ir/ops.def's last rows), on one shard's
// local tensors, with jax.lax's semantics on CPU (ops.def and the rows of
// common/ir/lax_binary_ops.def and lax_unary_ops.def say what each computes). They take every
// dtype the primitive does but bf16 and f16, which the cpu backend widens to f32 first and
// rounds the result of once (compute/cpu_ops.h). Each returns a new tensor; InvalidArgument
// for operands the primitive does not take (the type rules refuse them first), OutOfMemory
// when the result cannot be allocated. Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::kernels {

enum class LaxBinaryFn : uint8_t {
#define ATOLL_BINARY_OP(Name, name, Takes, Gives) k##Name,
#include "common/ir/lax_binary_ops.def"
};
enum class LaxUnaryFn : uint8_t {
#define ATOLL_LAX_UNARY_OP(Name, name, Takes, Gives) k##Name,
#include "common/ir/lax_unary_ops.def"
};
std::string_view LaxBinaryFnName(LaxBinaryFn fn);
std::string_view LaxUnaryFnName(LaxUnaryFn fn);

// Elementwise (lax_elementwise.cc): a and b of one dtype and shape; comparisons give bool.
Result<Tensor> LaxBinary(LaxBinaryFn fn, const Tensor& a, const Tensor& b);
Result<Tensor> LaxUnary(LaxUnaryFn fn, const Tensor& x);
// which (bool or i32, the cases' shape or []) picks among the cases (one dtype and shape).
Result<Tensor> SelectN(const Tensor& which, std::span<const Tensor* const> cases);
// min(max(x, lo), hi), lo and hi of x's shape or [].
Result<Tensor> Clamp(const Tensor& lo, const Tensor& x, const Tensor& hi);
// x's values as `to`, as XLA converts (ops.def's convert_element_type).
Result<Tensor> ConvertElementType(const Tensor& x, DType to);

// Moving data (lax_shape.cc): the layouts of ops.def's rows (reshape is shape_ops.h's).
Result<Tensor> BroadcastInDim(const Tensor& x, const Shape& shape,
                              const std::vector<int64_t>& dims);
Result<Tensor> TransposeNd(const Tensor& x, const std::vector<int64_t>& perm);
Result<Tensor> Slice(const Tensor& x, const std::vector<int64_t>& start,
                     const std::vector<int64_t>& limit, const std::vector<int64_t>& strides);
Result<Tensor> Concatenate(std::span<const Tensor* const> xs, int64_t dim);
Result<Tensor> Pad(const Tensor& x, const Tensor& value, const std::vector<int64_t>& low,
                   const std::vector<int64_t>& high, const std::vector<int64_t>& interior);
Result<Tensor> Rev(const Tensor& x, const std::vector<int64_t>& dims);
Result<Tensor> Iota(DType dtype, const Shape& shape, int64_t dim);

// Reducing (lax_reduce.cc).
enum class LaxReduceFn : uint8_t { kMax, kMin, kProd, kAnd, kOr };
Result<Tensor> ReduceAxes(LaxReduceFn fn, const Tensor& x, const std::vector<int64_t>& axes);
// The position along `axis` of the first largest (max) or smallest element, NaN first.
Result<Tensor> ArgReduce(bool max, const Tensor& x, int64_t axis, DType index);
// dot_general with the dimension numbers of ops.def's row, the result of dtype `out`.
struct DotDims {
  std::vector<int64_t> lhs_contracting, rhs_contracting, lhs_batch, rhs_batch;
};
Result<Tensor> DotGeneral(const Tensor& lhs, const Tensor& rhs, const DotDims& dims, DType out);

// The rest (lax_misc.cc).
// x^y by repeated squaring, as jax lowers integer_pow (a negative y: 1 / x^-y).
Result<Tensor> IntegerPow(const Tensor& x, int64_t y);
enum class CumulativeFn : uint8_t { kSum, kProd, kMax, kMin };
Result<Tensor> Cumulative(CumulativeFn fn, const Tensor& x, int64_t axis, bool reverse);
// The starts clamped into [0, size - slice size] per dimension, as jax clamps them.
std::vector<int64_t> ClampedStarts(const Shape& shape, const Shape& sizes,
                                   std::span<const Tensor* const> starts);
Result<Tensor> DynamicSlice(const Tensor& x, std::span<const Tensor* const> starts,
                            const Shape& sizes);
Result<Tensor> DynamicUpdateSlice(const Tensor& x, const Tensor& update,
                                  std::span<const Tensor* const> starts);
// The same bytes as a tensor of `to` (of the same width).
Result<Tensor> BitcastConvertType(const Tensor& x, DType to);

// gather and scatter (lax_gather.cc), with the dimension numbers of ops.def's rows.
struct GatherDims {
  std::vector<int64_t> offset_dims, collapsed_slice_dims, start_index_map, slice_sizes;
};
// `fill`: a slice that does not fit gives jax's fill value; else its start is clamped.
Result<Tensor> Gather(const Tensor& operand, const Tensor& indices, const GatherDims& dims,
                      const Shape& out_shape, bool fill);
struct ScatterDims {
  std::vector<int64_t> update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims;
};
enum class ScatterFn : uint8_t { kReplace, kAdd, kMul, kMin, kMax };
// `drop`: an update whose window does not fit is dropped; else its start is clamped.
Result<Tensor> Scatter(ScatterFn fn, const Tensor& operand, const Tensor& indices,
                       const Tensor& updates, const ScatterDims& dims, bool drop);

// Operand `output` reordered by a stable sort along `dim` of the first `keys` operands
// (lax_sort.cc).
Result<Tensor> Sort(std::span<const Tensor* const> xs, int64_t dim, int64_t keys, int64_t output);

// Windows (lax_window.cc), each dimension's numbers as ops.def's rows lay them out; the
// result's shape follows from x's.
struct Window {
  std::vector<int64_t> size, stride, low, high, base_dilation, window_dilation;
};
enum class WindowFn : uint8_t { kSum, kMax, kMin };
Result<Tensor> ReduceWindow(WindowFn fn, const Tensor& x, const Window& w);
// Max (ge) or min pooling's gradient: each window's selected element of x receives its
// source value (w's dilations must be 1).
Result<Tensor> SelectAndScatterAdd(const Tensor& source, const Tensor& x, const Window& w, bool ge);
struct ConvDims {
  std::vector<int64_t> strides, low, high, lhs_dilation, rhs_dilation;  // n each
  std::vector<int64_t> lhs_spec, rhs_spec, out_spec;                    // n + 2 each
  int64_t feature_groups = 1, batch_groups = 1;
};
// f32 or f64 lhs and rhs; products summed in f64; the result f64 when `out` is, else f32.
Result<Tensor> ConvGeneralDilated(const Tensor& lhs, const Tensor& rhs, const ConvDims& dims,
                                  DType out);
Result<Tensor> ReducePrecision(const Tensor& x, int exponent_bits, int mantissa_bits);
// conv_general_dilated by oneDNN (conv_onednn.cc) for f32 with 1 to 3 spatial dimensions, no
// lhs dilation, non-negative padding and no batch groups, the result of `out_shape`; nullopt
// for the configurations it does not take.
// Weights whose bytes are known not to change (rhs.content_id(): a store shard read in
// place, such as an ONNX model's initializers) are reordered into the primitive's layout
// once and kept, under a budget of bytes shared by the process, least recently used first
// out.
Result<std::optional<Tensor>> ConvWithOneDnn(const Tensor& lhs, const Tensor& rhs,
                                             const ConvDims& dims, const Shape& out_shape);
// What the kept weights are: calls that found them, calls that reordered and kept them,
// entries and their bytes now.
struct ConvWeightCacheStats {
  uint64_t hits = 0, misses = 0, entries = 0, bytes = 0;
};
ConvWeightCacheStats ConvWeightCacheStatsNow();
// The budget (256 MiB by default); a smaller one drops the least recently used at once.
void SetConvWeightCacheBudget(uint64_t bytes);

}  // namespace atl::kernels
