#include "kernels/filter.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "kernels/check.h"

namespace atl::kernels {

namespace {

template <typename T>
Result<Tensor> Keep(const Tensor& input, double threshold) {
  std::vector<T> kept;
  for (T v : input.as<T>()) {
    if (static_cast<double>(v) > threshold) kept.push_back(v);
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out,
                         internal::Allocate(input.dtype(), {static_cast<int64_t>(kept.size())}));
  std::copy(kept.begin(), kept.end(), out.as<T>().begin());
  return out;
}

}  // namespace

Result<Tensor> Filter(const Tensor& input, double threshold) {
  ATOLL_RETURN_IF_ERROR(internal::CheckWellFormed(input, "filter operand"));
  if (input.shape().size() != 1) {
    return InvalidArgument(
        fmt::format("filter takes a 1-D tensor, got {}", internal::Describe(input)));
  }
  Result<Tensor> out = InvalidArgument(
      fmt::format("filter takes f32, f64, i32 or i64, got {}", internal::Describe(input)));
  internal::ForFloat(input.dtype(),
                     [&](auto zero) { out = Keep<decltype(zero)>(input, threshold); });
  internal::ForInteger(input.dtype(),
                       [&](auto zero) { out = Keep<decltype(zero)>(input, threshold); });
  return out;
}

}  // namespace atl::kernels
