#include "atoll/tensor.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "common/base/checked_math.h"

namespace atl {

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kI32:
      return "i32";
  }
  return "?";
}

Result<DType> ParseDType(std::string_view name) {
  if (name == "f32") return DType::kF32;
  if (name == "i32") return DType::kI32;
  return InvalidArgument("unknown dtype '" + std::string(name) + "' (known: f32, i32)");
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
  }
  return 0;
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

Tensor Tensor::F32(Shape shape, std::vector<float> values) {
  Tensor t(DType::kF32, std::move(shape));
  // std::copy_n, not memcpy: an empty tensor's data() may be null.
  std::copy_n(values.begin(), std::min(t.nbytes() / sizeof(float), values.size()),
              reinterpret_cast<float*>(t.data()));
  return t;
}

Tensor Tensor::I32(Shape shape, std::vector<int32_t> values) {
  Tensor t(DType::kI32, std::move(shape));
  std::copy_n(values.begin(), std::min(t.nbytes() / sizeof(int32_t), values.size()),
              reinterpret_cast<int32_t*>(t.data()));
  return t;
}

namespace {

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
  out.reserve(static_cast<size_t>(num_elements()));
  switch (dtype_) {
    case DType::kF32:
      for (float v : as<float>()) out.push_back(v);
      break;
    case DType::kI32:
      for (int32_t v : as<int32_t>()) out.push_back(v);
      break;
  }
  return out;
}

std::string Tensor::ToString() const {
  return fmt::format("{}{} {{{}}}", DTypeName(dtype_), ShapeString(shape_),
                     fmt::join(ToDoubles(), ", "));
}

}  // namespace atl
