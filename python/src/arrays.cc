#include "python/src/arrays.h"

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <stdexcept>
#include <string_view>

namespace py = pybind11;

namespace atl::python {

namespace {

// The numpy dtype of each atoll dtype: numpy's own, and bfloat16 from ml_dtypes (the
// package JAX uses), whose arrays hold the same bits atoll's bf16 tensors do.
struct NumpyName {
  DType dtype;
  const char* numpy;
};
constexpr NumpyName kNumpyNames[] = {{DType::kF32, "float32"}, {DType::kI32, "int32"},
                                     {DType::kF16, "float16"}, {DType::kF64, "float64"},
                                     {DType::kI64, "int64"},   {DType::kBF16, "bfloat16"},
                                     {DType::kBool, "bool"},   {DType::kI8, "int8"},
                                     {DType::kU8, "uint8"},    {DType::kU32, "uint32"}};

py::dtype DTypeNamed(const char* name) {
  // ml_dtypes registers "bfloat16" with numpy once imported (atoll/__init__.py imports it).
  if (std::string_view(name) == "bfloat16") py::module_::import("ml_dtypes");
  return py::dtype(name);
}

// An array's atoll dtype, by numpy type number (which an array of the other byte order shares).
std::optional<DType> DTypeOf(const py::array& array) {
  for (const NumpyName& n : kNumpyNames) {
    if (array.dtype().num() == DTypeNamed(n.numpy).num()) return n.dtype;
  }
  return std::nullopt;
}

}  // namespace

pybind11::dtype NumpyDType(DType dtype) {
  for (const NumpyName& n : kNumpyNames) {
    if (n.dtype == dtype) return DTypeNamed(n.numpy);
  }
  throw std::logic_error("dtype " + std::string(DTypeName(dtype)) + " has no numpy dtype");
}

Result<Tensor> TensorFromArray(py::handle object, size_t index) {
  const std::string argument = "argument " + std::to_string(index);
  if (!py::isinstance<py::array>(object)) {
    return InvalidArgument(argument + ": expected a numpy array or a Future, got " +
                           py::cast<std::string>(py::str(py::type::of(object).attr("__name__"))));
  }
  auto array = py::reinterpret_borrow<py::array>(object);
  const std::optional<DType> known = DTypeOf(array);
  if (!known) {
    return InvalidArgument(argument +
                           ": atoll takes float32 (f32), float16 (f16), ml_dtypes.bfloat16 "
                           "(bf16), float64 (f64), int32 (i32), int64 (i64), bool, int8 (i8), "
                           "uint8 (u8) or uint32 (u32) arrays, got a " +
                           py::cast<std::string>(py::str(array.dtype())) +
                           " array (convert it with .astype())");
  }
  const DType dtype = *known;
  if (array.dtype().byteorder() == '>') {
    array = array.attr("astype")(NumpyDType(dtype));  // this host is little-endian
  }
  constexpr int kUsable =
      py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ | py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  if ((array.flags() & kUsable) != kUsable) {
    // A contiguous, aligned copy.
    array = py::module_::import("numpy").attr("require")(array, py::none(), "CA");
  }
  Shape shape(array.shape(), array.shape() + array.ndim());
  // Read only, never written through (a read-only array is fine): submitting copies the
  // values into the object stores.
  auto* data = static_cast<std::byte*>(const_cast<void*>(array.data()));
  const auto nbytes = static_cast<size_t>(array.nbytes());
  // The tensor holds a reference to the array, dropped with the GIL held whichever thread
  // lets the tensor go.
  std::shared_ptr<void> owner(new py::object(array), [](void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(p);
  });
  return Tensor::Adopt(dtype, std::move(shape), std::span<std::byte>(data, nbytes),
                       std::move(owner));
}

py::array ArrayFromTensor(Tensor tensor) {
  std::vector<py::ssize_t> shape(tensor.shape().begin(), tensor.shape().end());
  const py::dtype dtype = NumpyDType(tensor.dtype());
  if (tensor.nbytes() == 0) return py::array(dtype, shape, {});
  auto* owned = new Tensor(std::move(tensor));
  py::capsule base(owned, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(dtype, shape, {}, owned->data(), base);
}

}  // namespace atl::python
