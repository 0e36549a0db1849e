#include "atoll/tensor.h"

#include <cstring>

#include <fmt/format.h>

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

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string ShapeString(const Shape& shape) {
  std::vector<std::string> dims;
  for (int64_t d : shape) dims.push_back(d == kDynamicDim ? "?" : std::to_string(d));
  return fmt::format("[{}]", fmt::join(dims, ","));
}

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype),
      shape_(std::move(shape)),
      bytes_(static_cast<size_t>(NumElements(shape_)) * DTypeSize(dtype)) {}

Tensor Tensor::F32(Shape shape, std::vector<float> values) {
  Tensor t(DType::kF32, std::move(shape));
  std::memcpy(t.data(), values.data(), std::min(t.nbytes(), values.size() * sizeof(float)));
  return t;
}

Tensor Tensor::I32(Shape shape, std::vector<int32_t> values) {
  Tensor t(DType::kI32, std::move(shape));
  std::memcpy(t.data(), values.data(), std::min(t.nbytes(), values.size() * sizeof(int32_t)));
  return t;
}

Result<Tensor> Tensor::FromBytes(DType dtype, Shape shape, std::vector<std::byte> bytes) {
  for (auto d : shape) {
    if (d < 0) return InvalidArgument("negative dimension in shape " + ShapeString(shape));
  }
  const size_t want = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
  if (bytes.size() != want) {
    return InvalidArgument(fmt::format("{}{} needs {} bytes, got {}", DTypeName(dtype),
                                       ShapeString(shape), want, bytes.size()));
  }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.bytes_ = std::move(bytes);
  return t;
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
