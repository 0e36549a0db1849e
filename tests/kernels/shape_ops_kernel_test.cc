// kernels/shape_ops.h against index-by-index reference loops, for every dtype (elements of
// 2, 4 and 8 bytes).
#include "kernels/shape_ops.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cast.h"
#include "tests/kernels/kernel_checks.h"
#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

using testutil::ExpectInvalid;
using testutil::RandomF32;
using testutil::RandomI32;

// The multi-index of flat position `flat` in `shape`, and back.
std::vector<int64_t> Unflatten(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}
int64_t Flatten(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

// Random values of any dtype: integers from i32's, floats from f32's, cast (exactly for
// the integers; the floats round into bf16 and f16).
Tensor Random(std::mt19937& rng, DType dtype, const Shape& shape) {
  const Tensor x = IsFloating(dtype) ? RandomF32(rng, shape) : RandomI32(rng, shape);
  return Cast(x, dtype).value();
}

const DType kEveryDType[] = {DType::kF32, DType::kI32, DType::kBF16,
                             DType::kF16, DType::kF64, DType::kI64};

TEST(ShapeOpsKernelTest, TransposeMatchesReferenceForEveryPermutation) {
  std::mt19937 rng(51);
  const std::vector<Shape> shapes = {{1, 1},    {7, 13},      {33, 65}, {13, 1}, {0, 4},
                                     {3, 7, 5}, {2, 1, 3, 4}, {7},      {}};
  for (DType dtype : kEveryDType) {
    for (const Shape& shape : shapes) {
      const Tensor x = Random(rng, dtype, shape);
      const std::vector<double> xv = x.ToDoubles();
      std::vector<int> perm(shape.size());
      std::iota(perm.begin(), perm.end(), 0);
      do {
        ATOLL_ASSERT_OK_AND_ASSIGN(Tensor y, Transpose(x, perm));
        Shape out_shape(shape.size());
        for (size_t d = 0; d < shape.size(); ++d) out_shape[d] = shape[perm[d]];
        ASSERT_EQ(y.shape(), out_shape);
        ASSERT_EQ(y.dtype(), dtype);
        const std::vector<double> yv = y.ToDoubles();
        for (int64_t i = 0; i < y.num_elements(); ++i) {
          const auto out_idx = Unflatten(i, out_shape);
          std::vector<int64_t> in_idx(shape.size());
          for (size_t d = 0; d < shape.size(); ++d) in_idx[perm[d]] = out_idx[d];
          ASSERT_EQ(yv[i], xv[Flatten(in_idx, shape)]) << ShapeString(shape) << " element " << i;
        }
      } while (std::next_permutation(perm.begin(), perm.end()));
    }
  }
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor t, Transpose2D(Tensor::F32({2, 3}, {1, 2, 3, 4, 5, 6})));
  EXPECT_EQ(t, Tensor::F32({3, 2}, {1, 4, 2, 5, 3, 6}));
}

TEST(ShapeOpsKernelTest, TransposeRejectsBadPermutations) {
  const Tensor x(DType::kF32, {2, 3, 4});
  ExpectInvalid(Transpose(x, {0, 1}), {"permutation of [0, 3)", "[0,1]"});
  ExpectInvalid(Transpose(x, {0, 1, 1}), {"[0,1,1]"});
  ExpectInvalid(Transpose(x, {0, 1, 3}), {"[0,1,3]"});
  ExpectInvalid(Transpose2D(x), {"needs a matrix", "f32[2,3,4]"});
}

TEST(ShapeOpsKernelTest, SliceConcatAndSplitMatchReference) {
  std::mt19937 rng(52);
  for (DType dtype : kEveryDType) {
    for (const Shape& shape : std::vector<Shape>{{7}, {13, 6}, {3, 7, 5}, {1, 1}}) {
      const Tensor x = Random(rng, dtype, shape);
      const std::vector<double> xv = x.ToDoubles();
      for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis) {
        const int64_t dim = shape[axis];
        for (int64_t start = 0; start <= dim; start += std::max<int64_t>(1, dim / 3)) {
          const int64_t end = std::min(dim, start + 1 + dim / 2);
          ATOLL_ASSERT_OK_AND_ASSIGN(Tensor s, Slice(x, axis, start, end));
          Shape want = shape;
          want[axis] = end - start;
          ASSERT_EQ(s.shape(), want);
          const std::vector<double> sv = s.ToDoubles();
          for (int64_t i = 0; i < s.num_elements(); ++i) {
            auto idx = Unflatten(i, want);
            idx[axis] += start;
            ASSERT_EQ(sv[i], xv[Flatten(idx, shape)]);
          }
          // Cutting x in three at [start, end) and joining the pieces gives x back.
          ATOLL_ASSERT_OK_AND_ASSIGN(Tensor head, Slice(x, axis, 0, start));
          ATOLL_ASSERT_OK_AND_ASSIGN(Tensor tail,
                                     Slice(x, axis - static_cast<int64_t>(shape.size()), end, dim));
          const std::vector<Tensor> parts = {head, s, tail};
          ATOLL_ASSERT_OK_AND_ASSIGN(Tensor joined, Concat(parts, axis));
          ASSERT_EQ(joined, x);
        }
        ATOLL_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> pieces, Split(x, axis, 1));
        ASSERT_EQ(pieces.size(), 1u);
        EXPECT_EQ(pieces[0], x);
      }
    }
  }
  const Tensor x = Tensor::I32({2, 6}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  ATOLL_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> thirds, Split(x, 1, 3));
  ASSERT_EQ(thirds.size(), 3u);
  EXPECT_EQ(thirds[1], Tensor::I32({2, 2}, {2, 3, 8, 9}));
}

TEST(ShapeOpsKernelTest, SliceConcatAndSplitRejectBadArguments) {
  const Tensor x(DType::kF32, {4, 6});
  ExpectInvalid(Slice(x, 1, 2, 7), {"[2, 7)", "f32[4,6]", "<= 6"});
  ExpectInvalid(Slice(x, 1, 3, 2), {"[3, 2)"});
  ExpectInvalid(Slice(x, 2, 0, 1), {"axis 2"});
  const std::vector<Tensor> clash = {x, Tensor(DType::kF32, {5, 6})};
  ExpectInvalid(Concat(clash, 1), {"operand 1 is f32[5,6]", "f32[4,6]"});
  const std::vector<Tensor> dtypes = {x, Tensor(DType::kI32, {4, 6})};
  ExpectInvalid(Concat(dtypes, 0), {"i32[4,6]"});
  ExpectInvalid(Concat(std::vector<Tensor>{}, 0), {"at least one"});
  ExpectInvalid(Split(x, 1, 4), {"4 parts", "dividing 6"});
  ExpectInvalid(Split(x, 0, 0), {"0 parts"});
}

TEST(ShapeOpsKernelTest, PutColumnFillsOneColumnOfZeros) {
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor f, PutColumn(Tensor::F32({2}, {1.5f, -2}), 3, 1));
  EXPECT_EQ(f, Tensor::F32({2, 3}, {0, 1.5f, 0, 0, -2, 0}));
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor i, PutColumn(Tensor::I32({3}, {4, 5, 6}), 2, 0));
  EXPECT_EQ(i, Tensor::I32({3, 2}, {4, 0, 5, 0, 6, 0}));
  ExpectInvalid(PutColumn(Tensor::F32({2}, {1, 2}), 3, 3), {"column 3 of 3", "[0, 3)"});
  ExpectInvalid(PutColumn(Tensor(DType::kF32, {2, 2}), 3, 0), {"expected a vector"});
}

TEST(ShapeOpsKernelTest, BroadcastExpandAndReshape) {
  const Tensor row = Tensor::F32({3}, {1, 2, 3});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor rows, BroadcastTo(row, {2, 3}));
  EXPECT_EQ(rows, Tensor::F32({2, 3}, {1, 2, 3, 1, 2, 3}));
  const Tensor col = Tensor::I32({2, 1}, {7, 8});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor cols, BroadcastTo(col, {2, 3}));
  EXPECT_EQ(cols, Tensor::I32({2, 3}, {7, 7, 7, 8, 8, 8}));
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor cube, BroadcastTo(col, {2, 2, 2}));
  EXPECT_EQ(cube, Tensor::I32({2, 2, 2}, {7, 7, 8, 8, 7, 7, 8, 8}));
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor scalar, BroadcastTo(Tensor::F32({}, {5}), {2}));
  EXPECT_EQ(scalar, Tensor::F32({2}, {5, 5}));
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor same, BroadcastTo(row, {3}));
  EXPECT_EQ(same, row);
  ExpectInvalid(BroadcastTo(row, {3, 2}), {"cannot broadcast f32[3] to [3,2]"});
  ExpectInvalid(BroadcastTo(row, {1}), {"cannot broadcast"});
  ExpectInvalid(BroadcastTo(row, {-1, 3}), {"negative"});

  ATOLL_ASSERT_OK_AND_ASSIGN(Shape s, BroadcastShapes({7, 1, 3}, {5, 1}));
  EXPECT_EQ(s, (Shape{7, 5, 3}));
  ExpectInvalid(BroadcastShapes({7, 2}, {3}), {"[7,2]", "[3]", "2 against 3"});

  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor lead, ExpandDims(row, 0));
  EXPECT_EQ(lead.shape(), (Shape{1, 3}));
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor trail, ExpandDims(row, 1));
  EXPECT_EQ(trail.shape(), (Shape{3, 1}));
  EXPECT_EQ(trail.ToDoubles(), row.ToDoubles());
  ExpectInvalid(ExpandDims(row, 2), {"axis 2", "[0, 1]"});
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor flat, Reshape(rows, {6}));
  EXPECT_EQ(flat, Tensor::F32({6}, {1, 2, 3, 1, 2, 3}));
  ExpectInvalid(Reshape(rows, {4}), {"6 elements", "4 elements"});
}

}  // namespace
}  // namespace atl::kernels
