#include "python/src/arrays.h"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace py = pybind11;

namespace atl::python {

pybind11::dtype NumpyDType(DType dtype) {
  return dtype == DType::kI32 ? py::dtype::of<int32_t>() : py::dtype::of<float>();
}

Result<Tensor> TensorFromArray(py::handle object, size_t index) {
  const std::string argument = "argument " + std::to_string(index);
  if (!py::isinstance<py::array>(object)) {
    return InvalidArgument(argument + ": expected a numpy array or a Future, got " +
                           py::cast<std::string>(py::str(py::type::of(object).attr("__name__"))));
  }
  auto array = py::reinterpret_borrow<py::array>(object);
  // By type number, which an array of the other byte order shares: that one is converted.
  DType dtype;
  if (array.dtype().num() == py::dtype::of<float>().num()) {
    dtype = DType::kF32;
  } else if (array.dtype().num() == py::dtype::of<int32_t>().num()) {
    dtype = DType::kI32;
  } else {
    return InvalidArgument(argument + ": atoll tensors are float32 (f32) or int32 (i32), got a " +
                           py::cast<std::string>(py::str(array.dtype())) +
                           " array (convert it with .astype(numpy.float32) or numpy.int32)");
  }
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
