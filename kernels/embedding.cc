#include "kernels/embedding.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "kernels/check.h"

namespace atl::kernels {

using internal::Describe;

namespace {

Status CheckIds(const Tensor& ids, int64_t vocab_size, std::string_view what) {
  ATOLL_RETURN_IF_ERROR(internal::CheckI32(ids, what));
  const int32_t* id = ids.as<int32_t>().data();
  for (int64_t i = 0; i < ids.num_elements(); ++i) {
    if (id[i] < 0 || id[i] >= vocab_size) {
      return InvalidArgument(
          fmt::format("{}: id {} at flat position {} is out of range: "
                      "expected [0, {})",
                      what, id[i], i, vocab_size));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Tensor> EmbeddingGather(const Tensor& table, const Tensor& ids) {
  ATOLL_RETURN_IF_ERROR(internal::CheckF32(table, "embedding table"));
  if (table.shape().size() != 2) {
    return InvalidArgument(
        fmt::format("embedding table must be f32[v,d], got {}", Describe(table)));
  }
  const int64_t v = table.shape()[0];
  const int64_t d = table.shape()[1];
  ATOLL_RETURN_IF_ERROR(CheckIds(ids, v, "embedding ids"));
  Shape out_shape = ids.shape();
  out_shape.push_back(d);
  ATOLL_RETURN_IF_ERROR(internal::CheckShape(out_shape, "embedding result"));
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(DType::kF32, out_shape));
  if (d == 0) return out;
  const int32_t* id = ids.as<int32_t>().data();
  const float* src = table.as<float>().data();
  float* dst = out.as<float>().data();
  for (int64_t i = 0; i < ids.num_elements(); ++i) {
    std::memcpy(dst + i * d, src + id[i] * d, static_cast<size_t>(d) * sizeof(float));
  }
  return out;
}

Result<Tensor> EmbeddingGrad(const Tensor& dout, const Tensor& ids, int64_t vocab_size) {
  if (vocab_size < 0) {
    return InvalidArgument(
        fmt::format("embedding grad vocab size must be >= 0, got {}", vocab_size));
  }
  ATOLL_RETURN_IF_ERROR(CheckIds(ids, vocab_size, "embedding grad ids"));
  ATOLL_RETURN_IF_ERROR(internal::CheckF32(dout, "embedding grad dout"));
  const Shape& s = ids.shape();
  const bool shaped =
      dout.shape().size() == s.size() + 1 && std::equal(s.begin(), s.end(), dout.shape().begin());
  if (!shaped) {
    return InvalidArgument(
        fmt::format("embedding grad dout must be f32{} + [d] for ids {}, "
                    "got {}",
                    ShapeString(s), Describe(ids), Describe(dout)));
  }
  const int64_t d = dout.shape().back();
  ATOLL_RETURN_IF_ERROR(internal::CheckShape({vocab_size, d}, "embedding grad result"));
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(DType::kF32, {vocab_size, d}));
  const int32_t* id = ids.as<int32_t>().data();
  const float* src = dout.as<float>().data();
  float* dst = out.as<float>().data();
  for (int64_t i = 0; i < ids.num_elements(); ++i) {
    float* row = dst + id[i] * d;
    const float* g = src + i * d;
    for (int64_t j = 0; j < d; ++j) row[j] += g[j];
  }
  return out;
}

}  // namespace atl::kernels
