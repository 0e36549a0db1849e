// numpy arrays in and out of atoll Tensors, copying only where the layout demands it.
#pragma once

#include <cstddef>

#include <pybind11/numpy.h>

#include "atoll/tensor.h"

namespace atl::python {

// Argument `index` of a run as a Tensor. A C-contiguous, aligned float32, float16,
// ml_dtypes.bfloat16, float64, int32 or int64 array crosses without a copy: the tensor uses the
// array's memory and keeps the array alive (the caller must not change it until the submission
// returns). Another layout of those dtypes is copied into a contiguous array first. InvalidArgument
// for anything else (another dtype, not an array), naming the argument.
Result<Tensor> TensorFromArray(pybind11::handle array, size_t index);

// `tensor` as a numpy array over the tensor's own memory, which the array then owns: no copy.
// A bf16 tensor comes back as an ml_dtypes.bfloat16 array of the same bits.
pybind11::array ArrayFromTensor(Tensor tensor);

// The numpy dtype of `dtype` (ml_dtypes.bfloat16 for bf16).
pybind11::dtype NumpyDType(DType dtype);

}  // namespace atl::python
