#include "kernels/embedding.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "kernels/check.h"

namespace atl::kernels {

using internal::Describe;

namespace {

// Ids of an integer dtype, each in [0, vocab_size).
Status CheckIds(const Tensor& ids, int64_t vocab_size, std::string_view what) {
  ATOLL_RETURN_IF_ERROR(internal::CheckInteger(ids, what));
  Status status = Status::Ok();
  internal::ForInteger(ids.dtype(), [&](auto zero) {
    const auto* id = ids.as<decltype(zero)>().data();
    for (int64_t i = 0; i < ids.num_elements() && status.ok(); ++i) {
      if (id[i] < 0 || id[i] >= vocab_size) {
        status = InvalidArgument(
            fmt::format("{}: id {} at flat position {} is out of range: expected [0, {})", what,
                        id[i], i, vocab_size));
      }
    }
  });
  return status;
}

// Calls f(T{}, I{}) with the element types of a float `values` and integer `ids` that passed
// their checks.
template <typename F>
void ForValuesAndIds(const Tensor& values, const Tensor& ids, F&& f) {
  internal::ForFloat(values.dtype(), [&](auto value) {
    internal::ForInteger(ids.dtype(), [&](auto id) { f(value, id); });
  });
}

}  // namespace

Result<Tensor> EmbeddingGather(const Tensor& table, const Tensor& ids) {
  ATOLL_RETURN_IF_ERROR(internal::CheckFloat(table, "embedding table"));
  if (table.shape().size() != 2) {
    return InvalidArgument(
        fmt::format("embedding table must be f32[v,d] or f64[v,d], got {}", Describe(table)));
  }
  const int64_t v = table.shape()[0];
  const int64_t d = table.shape()[1];
  ATOLL_RETURN_IF_ERROR(CheckIds(ids, v, "embedding ids"));
  Shape out_shape = ids.shape();
  out_shape.push_back(d);
  ATOLL_RETURN_IF_ERROR(internal::CheckShape(out_shape, "embedding result"));
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(table.dtype(), out_shape));
  if (d == 0) return out;
  const size_t row_bytes = static_cast<size_t>(d) * DTypeSize(table.dtype());
  internal::ForInteger(ids.dtype(), [&](auto zero) {
    const auto* id = ids.as<decltype(zero)>().data();
    for (int64_t i = 0; i < ids.num_elements(); ++i) {
      std::memcpy(out.data() + i * row_bytes, table.data() + id[i] * row_bytes, row_bytes);
    }
  });
  return out;
}

Result<Tensor> EmbeddingGrad(const Tensor& dout, const Tensor& ids, int64_t vocab_size) {
  if (vocab_size < 0) {
    return InvalidArgument(
        fmt::format("embedding grad vocab size must be >= 0, got {}", vocab_size));
  }
  ATOLL_RETURN_IF_ERROR(CheckIds(ids, vocab_size, "embedding grad ids"));
  ATOLL_RETURN_IF_ERROR(internal::CheckFloat(dout, "embedding grad dout"));
  const Shape& s = ids.shape();
  const bool shaped =
      dout.shape().size() == s.size() + 1 && std::equal(s.begin(), s.end(), dout.shape().begin());
  if (!shaped) {
    return InvalidArgument(fmt::format("embedding grad dout must be {} + [d] for ids {}, got {}",
                                       ShapeString(s), Describe(ids), Describe(dout)));
  }
  const int64_t d = dout.shape().back();
  ATOLL_RETURN_IF_ERROR(internal::CheckShape({vocab_size, d}, "embedding grad result"));
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::Allocate(dout.dtype(), {vocab_size, d}));
  ForValuesAndIds(dout, ids, [&](auto value, auto id_zero) {
    using T = decltype(value);
    const auto* id = ids.as<decltype(id_zero)>().data();
    const T* src = dout.as<T>().data();
    T* dst = out.as<T>().data();
    for (int64_t i = 0; i < ids.num_elements(); ++i) {
      T* row = dst + id[i] * d;
      const T* g = src + i * d;
      for (int64_t j = 0; j < d; ++j) row[j] += g[j];
    }
  });
  return out;
}

}  // namespace atl::kernels
