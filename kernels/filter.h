// Filter: the elements of a 1-D tensor above a threshold, an output whose length depends on
// the data (the IR's kFilter). A pure function; never throws; thread-safe.
#pragma once

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::kernels {

// The elements of the 1-D `input` (f32, f64, i32 or i64) greater than `threshold`, in their order.
// Empty when none is. InvalidArgument for any other rank, dtype or a malformed tensor.
Result<Tensor> Filter(const Tensor& input, double threshold);

}  // namespace atl::kernels
