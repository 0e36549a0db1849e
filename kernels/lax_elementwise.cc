// The elementwise jax.lax primitives: one loop per row over the element type, with the
// semantics XLA gives them on CPU (wrapping integers, NaN-propagating max and min, shifts
// outside the width giving 0 or the sign, x % 0 = x).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include "common/base/dtype_types.h"
#include "kernels/cast.h"
#include "kernels/check.h"
#include "kernels/lax.h"

namespace atl::kernels {

namespace {

template <typename T>
constexpr bool kIsStorage = std::is_same_v<T, BF16> || std::is_same_v<T, F16>;
template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T>;
template <typename T>
constexpr bool kIsBool = std::is_same_v<T, bool>;
template <typename T>
constexpr bool kIsInt = std::is_integral_v<T> && !kIsBool<T>;

Status Refuse(std::string_view what, DType dtype) {
  return InvalidArgument(fmt::format("{} does not take {}", what, DTypeName(dtype)));
}

// out[i] = f(a[i], b[i]).
template <typename T, typename R, typename F>
void Map2(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const T* x = a.as<T>().data();
  const T* y = b.as<T>().data();
  R* z = out.as<R>().data();
  const int64_t n = a.num_elements();
  for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], y[i]);
}

template <typename T, typename F>
void Map1(const Tensor& a, Tensor& out, F f) {
  const T* x = a.as<T>().data();
  auto* z = out.as<std::invoke_result_t<F, T>>().data();
  const int64_t n = a.num_elements();
  for (int64_t i = 0; i < n; ++i) z[i] = f(x[i]);
}

template <typename T>
T WrapNeg(T v) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(U{0} - static_cast<U>(v));
}

// a's bits shifted by b, b read as unsigned: an amount of the width or more shifts all out.
template <typename T>
T Shift(LaxBinaryFn fn, T a, T b) {
  using U = std::make_unsigned_t<T>;
  using S = std::make_signed_t<T>;
  constexpr U kBits = sizeof(T) * 8;
  const U amount = static_cast<U>(b);
  switch (fn) {
    case LaxBinaryFn::kShiftLeft:
      return amount >= kBits ? T{0} : static_cast<T>(static_cast<U>(a) << amount);
    case LaxBinaryFn::kShiftRightLogical:
      return amount >= kBits ? T{0} : static_cast<T>(static_cast<U>(a) >> amount);
    default: {  // arithmetic: the sign bit fills
      const S s = static_cast<S>(a);
      return static_cast<T>(amount >= kBits ? (s < 0 ? S{-1} : S{0}) : static_cast<S>(s >> amount));
    }
  }
}

template <typename T>
Result<Tensor> LaxBinaryOf(LaxBinaryFn fn, const Tensor& a, const Tensor& b) {
  const bool compares = fn >= LaxBinaryFn::kEq;
  ATOLL_ASSIGN_OR_RETURN(
      Tensor out, internal::AllocateForOverwrite(compares ? DType::kBool : a.dtype(), a.shape()));
  auto same = [&](auto f) { Map2<T, T>(a, b, out, f); };
  auto test = [&](auto f) { Map2<T, bool>(a, b, out, f); };
  switch (fn) {
    case LaxBinaryFn::kMax:
    case LaxBinaryFn::kMin: {
      const bool max = fn == LaxBinaryFn::kMax;
      if constexpr (kIsFloat<T>) {
        same([max](T x, T y) {
          if (x != x || y != y) return std::numeric_limits<T>::quiet_NaN();
          return max ? std::max(x, y) : std::min(x, y);
        });
      } else {
        same([max](T x, T y) { return max ? std::max(x, y) : std::min(x, y); });
      }
      return out;
    }
    case LaxBinaryFn::kRem:
      if constexpr (kIsFloat<T>) {
        same([](T x, T y) { return std::fmod(x, y); });
        return out;
      } else if constexpr (kIsInt<T>) {
        same([](T x, T y) -> T {
          if (y == 0) return x;
          if constexpr (std::is_signed_v<T>) {
            if (y == T{-1}) return T{0};  // and MIN % -1, which overflows in C++
          }
          return static_cast<T>(x % y);
        });
        return out;
      }
      break;
    case LaxBinaryFn::kPow:
    case LaxBinaryFn::kAtan2:
    case LaxBinaryFn::kNextafter:
      if constexpr (kIsFloat<T>) {
        if (fn == LaxBinaryFn::kPow) same([](T x, T y) { return std::pow(x, y); });
        if (fn == LaxBinaryFn::kAtan2) same([](T x, T y) { return std::atan2(x, y); });
        if (fn == LaxBinaryFn::kNextafter) same([](T x, T y) { return std::nextafter(x, y); });
        return out;
      }
      break;
    case LaxBinaryFn::kAnd:
    case LaxBinaryFn::kOr:
    case LaxBinaryFn::kXor:
      if constexpr (kIsBool<T>) {
        if (fn == LaxBinaryFn::kAnd) same([](bool x, bool y) { return x && y; });
        if (fn == LaxBinaryFn::kOr) same([](bool x, bool y) { return x || y; });
        if (fn == LaxBinaryFn::kXor) same([](bool x, bool y) { return x != y; });
        return out;
      } else if constexpr (kIsInt<T>) {
        if (fn == LaxBinaryFn::kAnd) same([](T x, T y) { return static_cast<T>(x & y); });
        if (fn == LaxBinaryFn::kOr) same([](T x, T y) { return static_cast<T>(x | y); });
        if (fn == LaxBinaryFn::kXor) same([](T x, T y) { return static_cast<T>(x ^ y); });
        return out;
      }
      break;
    case LaxBinaryFn::kShiftLeft:
    case LaxBinaryFn::kShiftRightLogical:
    case LaxBinaryFn::kShiftRightArithmetic:
      if constexpr (kIsInt<T>) {
        same([fn](T x, T y) { return Shift(fn, x, y); });
        return out;
      }
      break;
    case LaxBinaryFn::kEq:
      test([](T x, T y) { return x == y; });
      return out;
    case LaxBinaryFn::kNe:
      test([](T x, T y) { return x != y; });
      return out;
    case LaxBinaryFn::kLt:
      test([](T x, T y) { return x < y; });
      return out;
    case LaxBinaryFn::kLe:
      test([](T x, T y) { return x <= y; });
      return out;
    case LaxBinaryFn::kGt:
      test([](T x, T y) { return x > y; });
      return out;
    case LaxBinaryFn::kGe:
      test([](T x, T y) { return x >= y; });
      return out;
  }
  return Refuse(LaxBinaryFnName(fn), a.dtype());
}

// erf^-1(x): M. Giles' single-precision approximation, as XLA computes it for f32 (w from
// log1p, as XLA's, so jax.random.normal's tails agree bit for bit); for f64
// that guess refined by two Newton steps on std::erf. +-1 give +-inf, |x| > 1 NaN.
template <typename T>
T ErfInv(T x) {
  if (x != x || std::fabs(x) > T{1}) return std::numeric_limits<T>::quiet_NaN();
  if (std::fabs(x) == T{1}) return std::copysign(std::numeric_limits<T>::infinity(), x);
  const float xf = static_cast<float>(x);
  float w = -std::log1p(-xf * xf);
  float p;
  if (w < 5.0f) {
    w -= 2.5f;
    p = 2.81022636e-08f;
    for (float c : {3.43273939e-07f, -3.5233877e-06f, -4.39150654e-06f, 0.00021858087f,
                    -0.00125372503f, -0.00417768164f, 0.246640727f, 1.50140941f}) {
      p = c + p * w;
    }
  } else {
    w = std::sqrt(w) - 3.0f;
    p = -0.000200214257f;
    for (float c : {0.000100950558f, 0.00134934322f, -0.00367342844f, 0.00573950773f,
                    -0.0076224613f, 0.00943887047f, 1.00167406f, 2.83297682f}) {
      p = c + p * w;
    }
  }
  T y = static_cast<T>(p * xf);
  if constexpr (std::is_same_v<T, double>) {
    for (int i = 0; i < 2; ++i) {  // erf'(y) = 2/sqrt(pi) e^-y^2
      y -= (std::erf(y) - x) / (1.1283791670955126 * std::exp(-y * y));
    }
  }
  return y;
}

// The float functions of the unary rows, by row.
template <typename T>
T FloatUnary(LaxUnaryFn fn, T x) {
  switch (fn) {
    case LaxUnaryFn::kFloor:
      return std::floor(x);
    case LaxUnaryFn::kCeil:
      return std::ceil(x);
    case LaxUnaryFn::kRoundAway:
      return std::round(x);
    case LaxUnaryFn::kRoundEven:
      return std::nearbyint(x);  // the default mode: to nearest even
    case LaxUnaryFn::kExp2:
      return std::exp2(x);
    case LaxUnaryFn::kLog1p:
      return std::log1p(x);
    case LaxUnaryFn::kExpm1:
      return std::expm1(x);
    case LaxUnaryFn::kSin:
      return std::sin(x);
    case LaxUnaryFn::kCos:
      return std::cos(x);
    case LaxUnaryFn::kTan:
      return std::tan(x);
    case LaxUnaryFn::kAsin:
      return std::asin(x);
    case LaxUnaryFn::kAcos:
      return std::acos(x);
    case LaxUnaryFn::kAtan:
      return std::atan(x);
    case LaxUnaryFn::kSinh:
      return std::sinh(x);
    case LaxUnaryFn::kCosh:
      return std::cosh(x);
    case LaxUnaryFn::kAsinh:
      return std::asinh(x);
    case LaxUnaryFn::kAcosh:
      return std::acosh(x);
    case LaxUnaryFn::kAtanh:
      return std::atanh(x);
    case LaxUnaryFn::kCbrt:
      return std::cbrt(x);
    case LaxUnaryFn::kErf:
      return std::erf(x);
    case LaxUnaryFn::kErfc:
      return std::erfc(x);
    case LaxUnaryFn::kLgamma:
      return std::lgamma(x);
    case LaxUnaryFn::kErfInv:
      return ErfInv(x);
    case LaxUnaryFn::kAbs:
      return std::fabs(x);
    case LaxUnaryFn::kSign:
      return x != x || x == 0 ? x : x > 0 ? T{1} : T{-1};
    case LaxUnaryFn::kNot:
    case LaxUnaryFn::kPopulationCount:
    case LaxUnaryFn::kIsFinite:
      break;  // not float-to-float
  }
  return std::numeric_limits<T>::quiet_NaN();
}

template <typename T>
Result<Tensor> LaxUnaryOf(LaxUnaryFn fn, const Tensor& x) {
  const bool tests = fn == LaxUnaryFn::kIsFinite;
  ATOLL_ASSIGN_OR_RETURN(
      Tensor out, internal::AllocateForOverwrite(tests ? DType::kBool : x.dtype(), x.shape()));
  if constexpr (kIsFloat<T>) {
    if (tests) {
      Map1<T>(x, out, [](T v) { return static_cast<bool>(std::isfinite(v)); });
      return out;
    }
    if (fn != LaxUnaryFn::kNot && fn != LaxUnaryFn::kPopulationCount) {
      Map1<T>(x, out, [fn](T v) { return FloatUnary(fn, v); });
      return out;
    }
  } else if constexpr (kIsBool<T>) {
    if (fn == LaxUnaryFn::kNot) {
      Map1<T>(x, out, [](bool v) { return !v; });
      return out;
    }
  } else if constexpr (kIsInt<T>) {
    using U = std::make_unsigned_t<T>;
    switch (fn) {
      case LaxUnaryFn::kNot:
        Map1<T>(x, out, [](T v) { return static_cast<T>(~v); });
        return out;
      case LaxUnaryFn::kPopulationCount:
        Map1<T>(x, out, [](T v) { return static_cast<T>(std::popcount(static_cast<U>(v))); });
        return out;
      case LaxUnaryFn::kAbs:
        if constexpr (std::is_signed_v<T>) {
          Map1<T>(x, out, [](T v) { return v < 0 ? WrapNeg(v) : v; });
        } else {
          Map1<T>(x, out, [](T v) { return v; });
        }
        return out;
      case LaxUnaryFn::kSign:
        Map1<T>(x, out, [](T v) { return static_cast<T>((v > 0) - (v < T{0})); });
        return out;
      default:
        break;
    }
  }
  return Refuse(LaxUnaryFnName(fn), x.dtype());
}

// Dispatches on a dtype the lax kernels compute in (every one but bf16 and f16).
template <typename Run>
Result<Tensor> ForLaxDType(DType dtype, std::string_view what, Run run) {
  Result<Tensor> out = Refuse(what, dtype);
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!kIsStorage<T>) out = run(zero);
  });
  return out;
}

constexpr std::string_view kBinaryNames[] = {
#define ATOLL_BINARY_OP(Name, name, Takes, Gives) name,
#include "common/ir/lax_binary_ops.def"
};
constexpr std::string_view kUnaryNames[] = {
#define ATOLL_LAX_UNARY_OP(Name, name, Takes, Gives) name,
#include "common/ir/lax_unary_ops.def"
};

// The value of element i of a tensor that is `shape` or [] (one value for all).
template <typename T>
T At(const Tensor& t, int64_t i) {
  return t.shape().empty() ? t.as<T>()[0] : t.as<T>()[i];
}

// select_n's elements moved as E, an unsigned type of their size: a boolean `which` of the
// cases' shape picking one of two is a blend that vectorizes, the rest a pick per element.
template <typename E>
void SelectInto(const Tensor& which, std::span<const Tensor* const> cases, Tensor& out) {
  E* z = out.as<E>().data();
  const int64_t n = out.num_elements();
  if (which.dtype() == DType::kBool && cases.size() == 2 && !which.shape().empty()) {
    const bool* w = which.as<bool>().data();
    const E* no = cases[0]->as<E>().data();
    const E* yes = cases[1]->as<E>().data();
    for (int64_t i = 0; i < n; ++i) z[i] = w[i] ? yes[i] : no[i];
    return;
  }
  const auto last = static_cast<int64_t>(cases.size()) - 1;
  for (int64_t i = 0; i < n; ++i) {
    int64_t pick = which.dtype() == DType::kBool ? static_cast<int64_t>(At<bool>(which, i))
                                                 : static_cast<int64_t>(At<int32_t>(which, i));
    pick = std::clamp<int64_t>(pick, 0, last);  // out of range is undefined in jax: any case
    z[i] = cases[pick]->as<E>()[i];
  }
}

// XLA's conversion of one element (ops.def's convert_element_type), From and To computed in.
template <typename To, typename From>
To Convert(From v) {
  if constexpr (kIsBool<To>) {
    return v != From{0};
  } else if constexpr (kIsInt<To> && kIsFloat<From>) {
    if (v != v) return To{0};
    constexpr double kLow = static_cast<double>(std::numeric_limits<To>::min());
    const double high = std::ldexp(1.0, std::numeric_limits<To>::digits);  // one past the max
    const double t = std::trunc(static_cast<double>(v));
    if (t < kLow) return std::numeric_limits<To>::min();
    if (t >= high) return std::numeric_limits<To>::max();
    return static_cast<To>(t);
  } else {
    return static_cast<To>(v);  // integers wrap (modular since C++20); into floats: rounded
  }
}

}  // namespace

std::string_view LaxBinaryFnName(LaxBinaryFn fn) {
  const auto i = static_cast<size_t>(fn);
  return i < std::size(kBinaryNames) ? kBinaryNames[i] : "?";
}
std::string_view LaxUnaryFnName(LaxUnaryFn fn) {
  const auto i = static_cast<size_t>(fn);
  return i < std::size(kUnaryNames) ? kUnaryNames[i] : "?";
}

Result<Tensor> LaxBinary(LaxBinaryFn fn, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
    return InvalidArgument(fmt::format("{}: operands must have one dtype and shape, got {} and {}",
                                       LaxBinaryFnName(fn), internal::Describe(a),
                                       internal::Describe(b)));
  }
  return ForLaxDType(a.dtype(), LaxBinaryFnName(fn),
                     [&](auto zero) { return LaxBinaryOf<decltype(zero)>(fn, a, b); });
}

Result<Tensor> LaxUnary(LaxUnaryFn fn, const Tensor& x) {
  return ForLaxDType(x.dtype(), LaxUnaryFnName(fn),
                     [&](auto zero) { return LaxUnaryOf<decltype(zero)>(fn, x); });
}

Result<Tensor> SelectN(const Tensor& which, std::span<const Tensor* const> cases) {
  if (cases.empty()) return InvalidArgument("select_n needs at least one case");
  const Tensor& first = *cases[0];
  for (const Tensor* c : cases) {
    if (c->dtype() != first.dtype() || c->shape() != first.shape()) {
      return InvalidArgument(fmt::format("select_n: the cases differ: {} and {}",
                                         internal::Describe(first), internal::Describe(*c)));
    }
  }
  if (!which.shape().empty() && which.shape() != first.shape()) {
    return InvalidArgument(fmt::format("select_n: which is {}, the cases {}",
                                       internal::Describe(which), internal::Describe(first)));
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(first.dtype(), first.shape()));
  switch (DTypeSize(first.dtype())) {
    case 1:
      SelectInto<uint8_t>(which, cases, out);
      break;
    case 2:
      SelectInto<uint16_t>(which, cases, out);
      break;
    case 4:
      SelectInto<uint32_t>(which, cases, out);
      break;
    default:
      SelectInto<uint64_t>(which, cases, out);
      break;
  }
  return out;
}

Result<Tensor> Clamp(const Tensor& lo, const Tensor& x, const Tensor& hi) {
  return ForLaxDType(x.dtype(), "clamp", [&](auto zero) -> Result<Tensor> {
    using T = decltype(zero);
    if constexpr (kIsBool<T>) {
      return Refuse("clamp", x.dtype());
    } else {
      ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(x.dtype(), x.shape()));
      const T* v = x.as<T>().data();
      T* z = out.as<T>().data();
      for (int64_t i = 0; i < x.num_elements(); ++i) {
        const T l = At<T>(lo, i), h = At<T>(hi, i);
        if constexpr (kIsFloat<T>) {
          if (v[i] != v[i] || l != l || h != h) {
            z[i] = std::numeric_limits<T>::quiet_NaN();
            continue;
          }
        }
        z[i] = std::min(std::max(v[i], l), h);
      }
      return out;
    }
  });
}

Result<Tensor> ConvertElementType(const Tensor& x, DType to) {
  if (x.dtype() == to) return x;
  const bool storage_out = ClassOf(to) == DTypeClass::kStorage;
  const bool float_in = IsFloating(x.dtype());
  if (storage_out && float_in) return Cast(x, to);  // rounded to nearest even once
  // Into a storage dtype from an integer or bool: through f32, as XLA converts.
  const DType via = storage_out ? DType::kF32 : to;
  Result<Tensor> out = ForLaxDType(x.dtype(), "convert_element_type", [&](auto from) {
    using From = decltype(from);
    return ForLaxDType(via, "convert_element_type", [&](auto into) -> Result<Tensor> {
      using To = decltype(into);
      ATOLL_ASSIGN_OR_RETURN(Tensor converted, internal::AllocateForOverwrite(via, x.shape()));
      Map1<From>(x, converted, [](From v) { return Convert<To>(v); });
      return converted;
    });
  });
  if (!out.ok() || !storage_out) return out;
  return Cast(*out, to);
}

}  // namespace atl::kernels
