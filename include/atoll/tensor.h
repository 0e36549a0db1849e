// Tensor: a dense, row-major, host-resident array, the value type that clients pass in and
// get back. Shards travel between processes as a TensorMeta header plus a raw data frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atoll/status.h"

namespace atl {

// The element types, one per row of atoll/dtypes.def (which says what each is), in its order:
// kF32, kI32, kBF16, kF16, kF64, kI64, kBool, kI8, kU8, kU32.
enum class DType : uint8_t {
#define ATOLL_DTYPE(Name, name, bytes, Class) k##Name,
#include "atoll/dtypes.def"
};
// How many dtypes there are: codes from 0 to kNumDTypes - 1.
inline constexpr size_t kNumDTypes = 0
#define ATOLL_DTYPE(Name, name, bytes, Class) +1
#include "atoll/dtypes.def"
    ;

// A dtype's class (atoll/dtypes.def): computed on in its own precision, a storage format
// computed on in f32, an integer, or a boolean.
enum class DTypeClass : uint8_t { kFloat, kStorage, kInteger, kBool };

// The row's name ("f32", "bf16", ...); "?" for a code outside the table.
std::string_view DTypeName(DType dtype);
// The dtype of that name; InvalidArgument naming the known ones otherwise.
Result<DType> ParseDType(std::string_view name);
// Bytes per element; 0 for a code outside the table.
size_t DTypeSize(DType dtype);
// The row's class; kInteger for a code outside the table (whose size is 0 anyway).
DTypeClass ClassOf(DType dtype);
// f32, f64, bf16 or f16.
inline bool IsFloating(DType dtype) {
  return ClassOf(dtype) == DTypeClass::kFloat || ClassOf(dtype) == DTypeClass::kStorage;
}

using Shape = std::vector<int64_t>;
// In a function's declared shape: a dimension whose size is known only once the function
// has run (it depends on the data, see FunctionBuilder::Filter). Tensors never have one.
inline constexpr int64_t kDynamicDim = -1;
// The number of elements of `shape`; -1 when a dimension is negative (dynamic) or the count
// does not fit in int64.
int64_t NumElements(const Shape& shape);
// The same and the bytes a tensor of `dtype` takes, checked: InvalidArgument naming the shape
// when a dimension is negative or the count or the size in bytes does not fit in int64, so
// that a size computed from a shape a user or a peer sent never wraps around.
Result<int64_t> CheckedNumElements(const Shape& shape);
Result<uint64_t> CheckedNumBytes(DType dtype, const Shape& shape);
std::string ShapeString(const Shape& shape);  // "[2,3]", "[?]" for a dynamic dimension

// Where a tensor's bytes came from, for kernels that keep what they derive from them
// (oneDNN's reordered convolution weights): two tensors with the same id hold the same bytes,
// which never change while either lives, and no other bytes ever get that id. Zero (the
// default): unknown, nothing may be kept.
struct ContentId {
  uint64_t source = 0;   // who numbers the versions (an object store process's instance)
  uint64_t version = 0;  // the bytes' number there (a sealed store shard's)
  bool known() const { return source != 0 || version != 0; }
  auto operator<=>(const ContentId&) const = default;
};

class Tensor {
 public:
  Tensor() = default;
  // A zero-filled tensor. `shape` must pass CheckedNumBytes; one that does not gives a
  // tensor without bytes (which no kernel accepts) rather than a wrapped-around size.
  Tensor(DType dtype, Shape shape);
  // A tensor whose bytes are left as the allocator gives them, for a kernel that writes every
  // element: zero-filling a result first costs a pass over its memory, as much as a cheap
  // elementwise op. Same shape rule as the constructor; small tensors are zero-filled anyway.
  static Tensor ForOverwrite(DType dtype, Shape shape);
  static Tensor F32(Shape shape, std::vector<float> values);
  static Tensor I32(Shape shape, std::vector<int32_t> values);
  static Tensor F64(Shape shape, std::vector<double> values);
  static Tensor I64(Shape shape, std::vector<int64_t> values);
  // A tensor of any dtype from values given as doubles, rounded to nearest even into a
  // floating dtype (once: an f64 value rounds straight to bf16, not through f32). An integer
  // dtype takes whole numbers in its range only; InvalidArgument names the first value that
  // is not, or a count other than the shape's.
  static Result<Tensor> FromDoubles(DType dtype, Shape shape, const std::vector<double>& values);
  // Adopts raw bytes; fails when their size does not match dtype and shape.
  static Result<Tensor> FromBytes(DType dtype, Shape shape, std::vector<std::byte> bytes);
  // Uses `bytes`, which `owner` keeps alive (a received message), instead of copying them:
  // the tensor holds `owner` until it goes away, and a copy of the tensor copies the bytes.
  // Fails when their size does not match dtype and shape or they are not aligned for dtype.
  static Result<Tensor> Adopt(DType dtype, Shape shape, std::span<std::byte> bytes,
                              std::shared_ptr<void> owner);
  // As Adopt, for bytes that must never be written (an object store block mapped read-only,
  // which `owner` pins), known as `id`: writable() is false, and a copy owns its bytes and
  // has no id (it may be written).
  static Result<Tensor> View(DType dtype, Shape shape, std::span<const std::byte> bytes,
                             std::shared_ptr<void> owner, ContentId id);

  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t num_elements() const { return NumElements(shape_); }
  size_t nbytes() const { return owner_ ? adopted_.size() : bytes_.size(); }
  std::byte* data() { return owner_ ? adopted_.data() : bytes_.data(); }
  const std::byte* data() const { return owner_ ? adopted_.data() : bytes_.data(); }

  template <typename T>
  std::span<T> as() {
    return {reinterpret_cast<T*>(data()), nbytes() / sizeof(T)};
  }
  template <typename T>
  std::span<const T> as() const {
    return {reinterpret_cast<const T*>(data()), nbytes() / sizeof(T)};
  }
  // Values widened to double, for printing and comparison whatever the dtype (exact but for
  // an i64 beyond 2^53).
  std::vector<double> ToDoubles() const;
  // "f32[2] {2, 3}"
  std::string ToString() const;

  bool operator==(const Tensor& other) const;

  // False for a View: code that would reuse a tensor's buffer for a result must not.
  bool writable() const { return !read_only_; }
  // The View's id; unknown for any other tensor.
  const ContentId& content_id() const { return content_id_; }

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  std::vector<std::byte> bytes_;  // the tensor's own bytes, unless it adopted some
  std::shared_ptr<void> owner_;   // set: the bytes are `adopted_`, which it keeps alive
  std::span<std::byte> adopted_;
  bool read_only_ = false;  // a View's: `adopted_` is mapped read-only
  ContentId content_id_;
};

}  // namespace atl
