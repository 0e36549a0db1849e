#include "kernels/cast.h"

#include <cmath>
#include <concepts>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include <fmt/format.h>

#include "common/base/dtype_types.h"
#include "kernels/check.h"
#include "kernels/half_convert.h"

namespace atl::kernels {

namespace {

// `v` of a floating type (float, double) or an integer one (bool too), as the integer type
// To (or bool, 0 and 1): nullopt when it has no value there (NaN, infinite, out of range after
// truncation toward zero).
template <std::integral To, typename From>
std::optional<To> ToInteger(From v) {
  if constexpr (std::is_same_v<From, To>) return v;
  // [min, 2^digits) holds To's range; NaN fails both comparisons.
  constexpr double kMin = static_cast<double>(std::numeric_limits<To>::min());
  const double upper = std::ldexp(1.0, std::numeric_limits<To>::digits);
  double t = 0;
  if constexpr (std::is_integral_v<From>) {
    t = static_cast<double>(v);  // an int64 beyond 2^53 rounds, but only to a whole number
                                 // that is out of every narrower type's range as it was
  } else {
    t = std::trunc(static_cast<double>(v));
  }
  if (!(t >= kMin && t < upper)) return std::nullopt;
  return static_cast<To>(t);
}

// One element of type From as To, or nullopt (into an integer type only).
template <typename To, typename From>
std::optional<To> CastOne(From v) {
  if constexpr (kIsHalf<From>) {
    return CastOne<To>(Widen(v));  // exact: f32 holds every bf16 and f16 value
  } else if constexpr (std::is_integral_v<To>) {
    return ToInteger<To>(v);
  } else if constexpr (kIsHalf<To>) {
    if constexpr (std::is_same_v<From, float>) {
      return Narrow<To>(v);
    } else {
      return Narrow<To>(RoundToOddF32(v));  // one rounding from f64 or an integer
    }
  } else {
    return static_cast<To>(v);  // to nearest (int64 to float and double alike)
  }
}

template <typename To, typename From>
Status CastElements(const Tensor& x, Tensor& out) {
  const From* in = x.as<From>().data();
  To* dst = out.as<To>().data();
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const std::optional<To> v = CastOne<To>(in[i]);
    if (!v) {
      return InvalidArgument(fmt::format("cast to {}: element {} ({}) has no {} value",
                                         DTypeName(out.dtype()), i, ToDouble(in[i]),
                                         DTypeName(out.dtype())));
    }
    dst[i] = *v;
  }
  return Status::Ok();
}

// f32 to and from bf16 and f16 through the vector loops; false for any other pair.
bool CastVectorized(const Tensor& x, Tensor& out) {
  const int64_t n = x.num_elements();
  const DType from = x.dtype(), to = out.dtype();
  if (from == DType::kF32 && to == DType::kBF16) {
    NarrowToBF16(x.as<float>().data(), out.as<BF16>().data(), n);
  } else if (from == DType::kF32 && to == DType::kF16) {
    NarrowToF16(x.as<float>().data(), out.as<F16>().data(), n);
  } else if (from == DType::kBF16 && to == DType::kF32) {
    WidenBF16(x.as<BF16>().data(), out.as<float>().data(), n);
  } else if (from == DType::kF16 && to == DType::kF32) {
    WidenF16(x.as<F16>().data(), out.as<float>().data(), n);
  } else {
    return false;
  }
  return true;
}

}  // namespace

Result<Tensor> Cast(const Tensor& x, DType to) {
  ATOLL_RETURN_IF_ERROR(internal::CheckWellFormed(x, "cast operand"));
  if (DTypeSize(to) == 0) {
    return InvalidArgument(fmt::format("cast to unknown dtype code {}", static_cast<int>(to)));
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(to, x.shape()));
  if (x.dtype() == to) {
    if (x.nbytes() > 0) std::memcpy(out.data(), x.data(), x.nbytes());
    return out;
  }
  if (CastVectorized(x, out)) return out;
  Status status = Status::Ok();
  VisitDType(x.dtype(), [&](auto from) {
    VisitDType(to,
               [&](auto into) { status = CastElements<decltype(into), decltype(from)>(x, out); });
  });
  ATOLL_RETURN_IF_ERROR(status);
  return out;
}

}  // namespace atl::kernels
