#include "python/src/arrays.h"

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/base/half.h"

namespace py = pybind11;

namespace atl::python {

namespace {

// The numpy dtype of each atoll dtype that numpy has; bf16 is the one it has not.
struct NumpyName {
  DType dtype;
  const char* numpy;
};
constexpr NumpyName kNumpyNames[] = {{DType::kF32, "float32"},
                                     {DType::kI32, "int32"},
                                     {DType::kF16, "float16"},
                                     {DType::kF64, "float64"},
                                     {DType::kI64, "int64"}};

// An array's atoll dtype, by numpy type number (which an array of the other byte order shares).
std::optional<DType> DTypeOf(const py::array& array) {
  for (const NumpyName& n : kNumpyNames) {
    if (array.dtype().num() == py::dtype(n.numpy).num()) return n.dtype;
  }
  return std::nullopt;
}

// A bf16 tensor as the f32 tensor of the same values (exact).
Tensor WidenBF16(const Tensor& t) {
  Tensor wide(DType::kF32, t.shape());
  const auto in = t.as<BF16>();
  auto out = wide.as<float>();
  for (size_t i = 0; i < in.size(); ++i) out[i] = Widen(in[i]);
  return wide;
}

}  // namespace

pybind11::dtype NumpyDType(DType dtype) {
  for (const NumpyName& n : kNumpyNames) {
    if (n.dtype == dtype) return py::dtype(n.numpy);
  }
  return py::dtype("float32");  // bf16, which arrays give as float32
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
                           ": atoll takes float32 (f32), float16 (f16), float64 (f64), int32 "
                           "(i32) or int64 (i64) arrays, got a " +
                           py::cast<std::string>(py::str(array.dtype())) +
                           " array (convert it with .astype(); numpy has no bfloat16: give bf16 "
                           "values as float32 and atoll.ops.cast them inside the function)");
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
  if (tensor.dtype() == DType::kBF16) tensor = WidenBF16(tensor);
  std::vector<py::ssize_t> shape(tensor.shape().begin(), tensor.shape().end());
  const py::dtype dtype = NumpyDType(tensor.dtype());
  if (tensor.nbytes() == 0) return py::array(dtype, shape, {});
  auto* owned = new Tensor(std::move(tensor));
  py::capsule base(owned, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(dtype, shape, {}, owned->data(), base);
}

}  // namespace atl::python
