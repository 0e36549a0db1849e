#include "atoll/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/base/checked_math.h"
#include "common/base/dtype_types.h"

namespace atl {

namespace {

// atoll/dtypes.def, indexed by code.
struct DTypeRow {
  std::string_view name;
  size_t bytes;
  DTypeClass cls;
};
constexpr DTypeRow kDTypes[] = {
#define ATOLL_DTYPE(Name, name, bytes, Class) {name, bytes, DTypeClass::Class},
#include "atoll/dtypes.def"
};
static_assert(std::size(kDTypes) == kNumDTypes);

const DTypeRow* RowOf(DType dtype) {
  const auto code = static_cast<size_t>(dtype);
  return code < kNumDTypes ? &kDTypes[code] : nullptr;
}

}  // namespace

std::string_view DTypeName(DType dtype) {
  const DTypeRow* row = RowOf(dtype);
  return row ? row->name : "?";
}

Result<DType> ParseDType(std::string_view name) {
  std::vector<std::string_view> known;
  for (size_t code = 0; code < kNumDTypes; ++code) {
    if (kDTypes[code].name == name) return static_cast<DType>(code);
    known.push_back(kDTypes[code].name);
  }
  return InvalidArgument(
      fmt::format("unknown dtype '{}' (known: {})", name, fmt::join(known, ", ")));
}

size_t DTypeSize(DType dtype) {
  const DTypeRow* row = RowOf(dtype);
  return row ? row->bytes : 0;
}

DTypeClass ClassOf(DType dtype) {
  const DTypeRow* row = RowOf(dtype);
  return row ? row->cls : DTypeClass::kInteger;
}

Result<int64_t> CheckedNumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("shape " + ShapeString(shape) + " has a negative dimension");
    const std::optional<int64_t> product = CheckedMul(n, d);
    if (!product) {
      return InvalidArgument("shape " + ShapeString(shape) +
                             " has more elements than an int64 can count");
    }
    n = *product;
  }
  return n;
}

Result<uint64_t> CheckedNumBytes(DType dtype, const Shape& shape) {
  const auto item = static_cast<int64_t>(DTypeSize(dtype));
  if (item == 0) {
    return InvalidArgument("unknown dtype code " + std::to_string(static_cast<int>(dtype)));
  }
  ATOLL_ASSIGN_OR_RETURN(const int64_t elements, CheckedNumElements(shape));
  const std::optional<int64_t> bytes = CheckedMul(elements, item);
  if (!bytes) {
    return InvalidArgument(fmt::format("{}{} takes more bytes than an int64 can count",
                                       DTypeName(dtype), ShapeString(shape)));
  }
  return static_cast<uint64_t>(*bytes);
}

int64_t NumElements(const Shape& shape) {
  auto n = CheckedNumElements(shape);
  return n.ok() ? *n : -1;
}

std::string ShapeString(const Shape& shape) {
  std::vector<std::string> dims;
  for (int64_t d : shape) dims.push_back(d == kDynamicDim ? "?" : std::to_string(d));
  return fmt::format("[{}]", fmt::join(dims, ","));
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  if (auto bytes = CheckedNumBytes(dtype_, shape_); bytes.ok()) bytes_.resize(*bytes);
}

Tensor Tensor::ForOverwrite(DType dtype, Shape shape) {
  // Below a few pages the fill is cheaper than the second allocation (the owner) it saves.
  constexpr uint64_t kUninitializedFrom = 16 * 1024;
  const Result<uint64_t> bytes = CheckedNumBytes(dtype, shape);
  if (!bytes.ok() || *bytes < kUninitializedFrom) return Tensor(dtype, std::move(shape));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  // new[] of bytes default-initializes (leaves them as they are) and aligns to
  // __STDCPP_DEFAULT_NEW_ALIGNMENT__ (16), enough for every dtype; the tensor then holds
  // them as it holds adopted bytes.
  std::shared_ptr<std::byte[]> buffer(new std::byte[*bytes]);
  t.adopted_ = std::span<std::byte>(buffer.get(), *bytes);
  t.owner_ = std::move(buffer);
  return t;
}

namespace {

// A tensor of `dtype`, whose elements are T, holding `values` (as many as fit).
template <typename T>
Tensor Holding(DType dtype, Shape shape, const std::vector<T>& values) {
  Tensor t(dtype, std::move(shape));
  // std::copy_n, not memcpy: an empty tensor's data() may be null.
  std::copy_n(values.begin(), std::min(t.nbytes() / sizeof(T), values.size()),
              reinterpret_cast<T*>(t.data()));
  return t;
}

}  // namespace

Tensor Tensor::F32(Shape shape, std::vector<float> values) {
  return Holding(DType::kF32, std::move(shape), values);
}
Tensor Tensor::I32(Shape shape, std::vector<int32_t> values) {
  return Holding(DType::kI32, std::move(shape), values);
}
Tensor Tensor::F64(Shape shape, std::vector<double> values) {
  return Holding(DType::kF64, std::move(shape), values);
}
Tensor Tensor::I64(Shape shape, std::vector<int64_t> values) {
  return Holding(DType::kI64, std::move(shape), values);
}

namespace {

// `v` as an element of type T: rounded to nearest even for a floating type, or nullopt
// for an integer type unless it is a whole number in T's range.
template <typename T>
std::optional<T> FromDouble(double v) {
  if constexpr (std::is_same_v<T, BF16>) {
    return NarrowToBF16(RoundToOddF32(v));
  } else if constexpr (std::is_same_v<T, F16>) {
    return NarrowToF16(RoundToOddF32(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    // [min, 2^digits) holds the whole numbers of T's range (bool: 0 and 1); NaN fails both
    // comparisons.
    constexpr double kMin = static_cast<double>(std::numeric_limits<T>::min());
    const double upper = std::ldexp(1.0, std::numeric_limits<T>::digits);
    if (!(v >= kMin && v < upper) || std::trunc(v) != v) return std::nullopt;
    return static_cast<T>(v);
  }
}

// What FromBytes and Adopt check: the same rules, whoever holds the bytes.
Status CheckSize(DType dtype, const Shape& shape, size_t size) {
  ATOLL_ASSIGN_OR_RETURN(const uint64_t want, CheckedNumBytes(dtype, shape));
  if (size != want) {
    return InvalidArgument(fmt::format("{}{} needs {} bytes, got {}", DTypeName(dtype),
                                       ShapeString(shape), want, size));
  }
  return Status::Ok();
}

}  // namespace

Result<Tensor> Tensor::FromDoubles(DType dtype, Shape shape, const std::vector<double>& values) {
  ATOLL_ASSIGN_OR_RETURN(const int64_t count, CheckedNumElements(shape));
  if (static_cast<int64_t>(values.size()) != count) {
    return InvalidArgument(
        fmt::format("{} values for shape {}", values.size(), ShapeString(shape)));
  }
  if (DTypeSize(dtype) == 0) {
    return InvalidArgument("unknown dtype code " + std::to_string(static_cast<int>(dtype)));
  }
  Tensor t(dtype, std::move(shape));
  Status status = Status::Ok();
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* out = t.as<T>().data();
    for (size_t i = 0; i < values.size(); ++i) {
      const std::optional<T> v = FromDouble<T>(values[i]);
      if (!v) {
        status = InvalidArgument(fmt::format("value {} ({}) is not a whole number in {}'s range", i,
                                             values[i], DTypeName(dtype)));
        return;
      }
      out[i] = *v;
    }
  });
  ATOLL_RETURN_IF_ERROR(status);
  return t;
}

Result<Tensor> Tensor::FromBytes(DType dtype, Shape shape, std::vector<std::byte> bytes) {
  ATOLL_RETURN_IF_ERROR(CheckSize(dtype, shape, bytes.size()));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.bytes_ = std::move(bytes);
  return t;
}

Result<Tensor> Tensor::Adopt(DType dtype, Shape shape, std::span<std::byte> bytes,
                             std::shared_ptr<void> owner) {
  ATOLL_RETURN_IF_ERROR(CheckSize(dtype, shape, bytes.size()));
  if (reinterpret_cast<uintptr_t>(bytes.data()) % std::max<size_t>(DTypeSize(dtype), 1) != 0) {
    return InvalidArgument(
        fmt::format("{} bytes at an address not aligned for {}", bytes.size(), DTypeName(dtype)));
  }
  if (owner == nullptr) return InvalidArgument("adopted bytes need an owner");
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.owner_ = std::move(owner);
  t.adopted_ = bytes;
  return t;
}

Result<Tensor> Tensor::View(DType dtype, Shape shape, std::span<const std::byte> bytes,
                            std::shared_ptr<void> owner, ContentId id) {
  // Adopt's checks; the bytes are only ever read through a View (writable() is false).
  ATOLL_ASSIGN_OR_RETURN(
      Tensor t, Adopt(dtype, std::move(shape), {const_cast<std::byte*>(bytes.data()), bytes.size()},
                      std::move(owner)));
  t.read_only_ = true;
  t.content_id_ = id;
  return t;
}

// A copy owns its bytes, adopted or not: value semantics, as for any other tensor.
Tensor::Tensor(const Tensor& other)
    : dtype_(other.dtype_),
      shape_(other.shape_),
      bytes_(other.data(), other.data() + other.nbytes()) {}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

bool Tensor::operator==(const Tensor& other) const {
  return dtype_ == other.dtype_ && shape_ == other.shape_ && nbytes() == other.nbytes() &&
         (nbytes() == 0 || std::memcmp(data(), other.data(), nbytes()) == 0);
}

std::vector<double> Tensor::ToDoubles() const {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(num_elements(), 0)));
  VisitDType(dtype_, [&](auto zero) {
    for (auto v : as<decltype(zero)>()) out.push_back(ToDouble(v));
  });
  return out;
}

std::string Tensor::ToString() const {
  return fmt::format("{}{} {{{}}}", DTypeName(dtype_), ShapeString(shape_),
                     fmt::join(ToDoubles(), ", "));
}

}  // namespace atl
