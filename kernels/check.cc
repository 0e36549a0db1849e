#include "kernels/check.h"

#include <new>
#include <utility>

#include <fmt/format.h>

namespace atl::kernels::internal {

std::string Describe(const Tensor& t) {
  return fmt::format("{}{}", DTypeName(t.dtype()), ShapeString(t.shape()));
}

Status CheckShape(const Shape& shape, std::string_view what) {
  // The widest dtype's bytes (f64 and i64 take 8) must be countable.
  return CheckedNumBytes(DType::kF64, shape).status().WithContext(what);
}

Status CheckWellFormed(const Tensor& t, std::string_view what) {
  if (DTypeSize(t.dtype()) == 0) {
    return InvalidArgument(
        fmt::format("{} has unknown dtype {}", what, static_cast<int>(t.dtype())));
  }
  auto bytes = CheckedNumBytes(t.dtype(), t.shape());
  if (!bytes.ok()) return bytes.status().WithContext(what);
  const uint64_t want = *bytes;
  if (t.nbytes() != want) {
    return InvalidArgument(fmt::format("{} {} is malformed: it holds {} bytes, not {}", what,
                                       Describe(t), t.nbytes(), want));
  }
  return Status::Ok();
}

namespace {

Status CheckDType(const Tensor& t, DType dtype, std::string_view what) {
  ATOLL_RETURN_IF_ERROR(CheckWellFormed(t, what));
  if (t.dtype() != dtype) {
    return InvalidArgument(
        fmt::format("{} must be {}, got {}", what, DTypeName(dtype), Describe(t)));
  }
  return Status::Ok();
}

}  // namespace

Status CheckF32(const Tensor& t, std::string_view what) { return CheckDType(t, DType::kF32, what); }
Status CheckI32(const Tensor& t, std::string_view what) { return CheckDType(t, DType::kI32, what); }

Status CheckFloat(const Tensor& t, std::string_view what) {
  ATOLL_RETURN_IF_ERROR(CheckWellFormed(t, what));
  if (t.dtype() == DType::kF32 || t.dtype() == DType::kF64) return Status::Ok();
  if (ClassOf(t.dtype()) == DTypeClass::kStorage) {
    return InvalidArgument(fmt::format(
        "{} must be f32 or f64, got {}: a storage dtype is computed on in f32 (cast it first)",
        what, Describe(t)));
  }
  return InvalidArgument(fmt::format("{} must be f32 or f64, got {}", what, Describe(t)));
}

Status CheckInteger(const Tensor& t, std::string_view what) {
  ATOLL_RETURN_IF_ERROR(CheckWellFormed(t, what));
  if (t.dtype() == DType::kI32 || t.dtype() == DType::kI64) return Status::Ok();
  return InvalidArgument(fmt::format("{} must be i32 or i64, got {}", what, Describe(t)));
}

Status CheckTypeShape(const Tensor& t, DType dtype, const Shape& shape, std::string_view what) {
  ATOLL_RETURN_IF_ERROR(CheckDType(t, dtype, what));
  if (t.shape() != shape) {
    return InvalidArgument(fmt::format("{} must be {}{}, got {}", what, DTypeName(dtype),
                                       ShapeString(shape), Describe(t)));
  }
  return Status::Ok();
}

Result<int> NormalizeAxis(int64_t axis, size_t rank, std::string_view what) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    return InvalidArgument(fmt::format(
        "{}: axis {} is out of range for rank {} (expected [{}, {}))", what, axis, rank, -r, r));
  }
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

namespace {

template <typename Make>
Result<Tensor> AllocateWith(DType dtype, Shape shape, Make make) {
  try {
    return make(dtype, shape);
  } catch (const std::bad_alloc&) {
    return OutOfMemory(fmt::format("cannot allocate a {} tensor of shape {}", DTypeName(dtype),
                                   ShapeString(shape)));
  }
}

}  // namespace

Result<Tensor> Allocate(DType dtype, Shape shape) {
  return AllocateWith(dtype, std::move(shape), [](DType d, Shape& s) { return Tensor(d, s); });
}

Result<Tensor> AllocateForOverwrite(DType dtype, Shape shape) {
  return AllocateWith(dtype, std::move(shape),
                      [](DType d, Shape& s) { return Tensor::ForOverwrite(d, s); });
}

}  // namespace atl::kernels::internal
