// Tensor: a dense, row-major, host-resident array, the value type that clients pass in and
// get back. Shards travel between processes as a TensorMeta header plus a raw data frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atoll/status.h"

namespace atl {

enum class DType : uint8_t { kF32 = 0, kI32 = 1 };

std::string_view DTypeName(DType dtype);
Result<DType> ParseDType(std::string_view name);
size_t DTypeSize(DType dtype);

using Shape = std::vector<int64_t>;
// In a function's declared shape: a dimension whose size is known only once the function
// has run (it depends on the data, see FunctionBuilder::Filter). Tensors never have one.
inline constexpr int64_t kDynamicDim = -1;
int64_t NumElements(const Shape& shape);
std::string ShapeString(const Shape& shape);  // "[2,3]", "[?]" for a dynamic dimension

class Tensor {
 public:
  Tensor() = default;
  // A zero-filled tensor.
  Tensor(DType dtype, Shape shape);
  static Tensor F32(Shape shape, std::vector<float> values);
  static Tensor I32(Shape shape, std::vector<int32_t> values);
  // Adopts raw bytes; fails when their size does not match dtype and shape.
  static Result<Tensor> FromBytes(DType dtype, Shape shape, std::vector<std::byte> bytes);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t num_elements() const { return NumElements(shape_); }
  size_t nbytes() const { return bytes_.size(); }
  std::byte* data() { return bytes_.data(); }
  const std::byte* data() const { return bytes_.data(); }

  template <typename T>
  std::span<T> as() {
    return {reinterpret_cast<T*>(bytes_.data()), bytes_.size() / sizeof(T)};
  }
  template <typename T>
  std::span<const T> as() const {
    return {reinterpret_cast<const T*>(bytes_.data()), bytes_.size() / sizeof(T)};
  }
  // Values widened to double, for printing and comparison whatever the dtype.
  std::vector<double> ToDoubles() const;
  // "f32[2] {2, 3}"
  std::string ToString() const;

  bool operator==(const Tensor& other) const = default;

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  std::vector<std::byte> bytes_;
};

}  // namespace atl
