// numpy's .npy format, the file each checkpoint block is (docs/design-notes.md,
// "Checkpoints"): the magic "\x93NUMPY", a version, a header that is a Python dict literal
// ({'descr': '<f4', 'fortran_order': False, 'shape': (16, 32), }) padded with spaces to a
// multiple of 64 bytes and ended by '\n', then the array's bytes in C order. Version 1.0 is
// written (what numpy writes for any header under 64 KiB); 1.0, 2.0 and 3.0 are read.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::checkpoint {

// numpy's name for `dtype` ("<f4"), little-endian; InvalidArgument for a dtype with no row
// in the table (npy.cc), naming those that have one.
Result<std::string_view> NpyDescr(DType dtype);
// The inverse, and bf16 for '<u2' (raw bits, as atoll wrote bf16 before 'bfloat16');
// InvalidArgument for any other descr (big-endian, Fortran, other types).
Result<DType> DTypeOfNpyDescr(std::string_view descr);

// The bytes before the data of a C-ordered array of `dtype` and `shape`.
Result<std::string> EncodeNpyHeader(DType dtype, const Shape& shape);

struct NpyHeader {
  DType dtype = DType::kF32;
  Shape shape;
  size_t data_offset = 0;  // where the array's bytes start
};

// The header at the start of `file`. InvalidArgument, naming what is wrong, for anything
// but a C-ordered array of a dtype in the table: a bad magic or version, a truncated or
// malformed header, fortran_order True, another descr, a negative dimension.
Result<NpyHeader> ParseNpyHeader(std::span<const std::byte> file);

// A whole file: its header and exactly the bytes that header says (InvalidArgument for a
// file that is longer or shorter).
Result<Tensor> ParseNpy(std::span<const std::byte> file);

}  // namespace atl::checkpoint
