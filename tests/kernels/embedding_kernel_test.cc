// kernels/embedding.h: gather against a row-copy loop, the gradient against a scatter-add
// loop (repeated ids accumulate).
#include "kernels/embedding.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/kernels/kernel_checks.h"
#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

using testutil::ExpectClose;
using testutil::ExpectInvalid;
using testutil::RandomF32;
using testutil::RandomI32;

TEST(EmbeddingKernelTest, GatherAndGradMatchReference) {
  std::mt19937 rng(61);
  for (int64_t v : {1, 7, 33}) {
    for (int64_t d : {1, 13}) {
      for (const Shape& ids_shape : std::vector<Shape>{{1}, {13}, {3, 7}, {0}}) {
        const Tensor table = RandomF32(rng, {v, d});
        const Tensor ids = RandomI32(rng, ids_shape, 0, static_cast<int32_t>(v - 1));
        Shape out_shape = ids_shape;
        out_shape.push_back(d);
        const auto tv = table.ToDoubles();
        const auto id = ids.as<int32_t>();
        std::vector<double> ref;
        for (int32_t i : id) ref.insert(ref.end(), tv.begin() + i * d, tv.begin() + (i + 1) * d);
        SCOPED_TRACE(testing::Message()
                     << "v=" << v << " d=" << d << " ids " << ShapeString(ids_shape));
        ATOLL_ASSERT_OK_AND_ASSIGN(Tensor out, EmbeddingGather(table, ids));
        ExpectClose(out, out_shape, ref, 0, 0);

        const Tensor dout = RandomF32(rng, out_shape);
        const auto gv = dout.ToDoubles();
        std::vector<double> dtable(v * d, 0.0);
        for (size_t n = 0; n < id.size(); ++n) {
          for (int64_t j = 0; j < d; ++j) dtable[id[n] * d + j] += gv[n * d + j];
        }
        ATOLL_ASSERT_OK_AND_ASSIGN(Tensor grad, EmbeddingGrad(dout, ids, v));
        ExpectClose(grad, {v, d}, dtable, 1e-5, 1e-6);
      }
    }
  }
}

TEST(EmbeddingKernelTest, RejectsBadIdsAndShapes) {
  const Tensor table(DType::kF32, {5, 3});
  ExpectInvalid(EmbeddingGather(table, Tensor::I32({3}, {0, 5, 1})),
                {"id 5 at flat position 1", "[0, 5)"});
  ExpectInvalid(EmbeddingGather(table, Tensor::I32({1}, {-1})), {"id -1"});
  ExpectInvalid(EmbeddingGather(table, Tensor(DType::kF32, {2})), {"ids", "must be i32"});
  ExpectInvalid(EmbeddingGather(Tensor(DType::kF32, {5}), Tensor(DType::kI32, {2})),
                {"f32[v,d]", "f32[5]"});
  const Tensor ids = Tensor::I32({2}, {0, 4});
  ExpectInvalid(EmbeddingGrad(Tensor(DType::kF32, {3, 3}), ids, 5),
                {"dout", "[2] + [d]", "f32[3,3]"});
  ExpectInvalid(EmbeddingGrad(Tensor(DType::kF32, {2, 3}), ids, 4), {"id 4", "[0, 4)"});
  ExpectInvalid(EmbeddingGrad(Tensor(DType::kF32, {2, 3}), ids, -1), {"vocab size"});
}

}  // namespace
}  // namespace atl::kernels
