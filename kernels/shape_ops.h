// Data-movement kernels for tensors of every dtype: transpose, slice, concat, split, reshape,
// expand-dims and numpy broadcasting. Pure functions returning new tensors; they never throw
// and give InvalidArgument naming what was expected and what came. Thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::kernels {

// out.shape[i] = x.shape[perm[i]]; `perm` must be a permutation of [0, rank).
Result<Tensor> Transpose(const Tensor& x, const std::vector<int>& perm);
// The transpose of a matrix: [m,n] -> [n,m].
Result<Tensor> Transpose2D(const Tensor& x);

// Elements [start, end) along `axis` (negative counts from the end); needs
// 0 <= start <= end <= x.shape[axis].
Result<Tensor> Slice(const Tensor& x, int64_t axis, int64_t start, int64_t end);

// The tensors joined along `axis`: all of one dtype and rank, equal in every other
// dimension. At least one tensor.
Result<Tensor> Concat(std::span<const Tensor> xs, int64_t axis);
// The same over tensors held elsewhere, which are not copied first.
Result<Tensor> Concat(std::span<const Tensor* const> xs, int64_t axis);

// `x` cut along `axis` into `parts` equal pieces, in order; x.shape[axis] must be a multiple
// of parts (parts >= 1).
Result<std::vector<Tensor>> Split(const Tensor& x, int64_t axis, int64_t parts);

// The same elements in row-major order under a new shape of the same element count.
Result<Tensor> Reshape(const Tensor& x, Shape shape);

// `column` [m] as column j of an otherwise zero [m, width] (0 <= j < width), of its dtype.
Result<Tensor> PutColumn(const Tensor& column, int64_t width, int64_t j);
// Inserts a dimension of size 1 at `axis` in [0, rank] (0: leading, rank: trailing).
Result<Tensor> ExpandDims(const Tensor& x, int64_t axis);

// The numpy broadcast of two shapes: aligned at the right, each dimension pair equal or one
// of them 1 (a missing dimension counts as 1). InvalidArgument naming the first pair that
// clashes.
Result<Shape> BroadcastShapes(const Shape& a, const Shape& b);

// `x` repeated to `shape` by numpy rules: BroadcastShapes(x.shape, shape) must be `shape`.
// A row vector [n] to [m,n], a column [m,1] to [m,n], a scalar to anything.
Result<Tensor> BroadcastTo(const Tensor& x, const Shape& shape);

}  // namespace atl::kernels
