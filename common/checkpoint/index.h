// A checkpoint's index (index.json, docs/design-notes.md "Checkpoints"): every tensor's name,
// dtype, global shape and how it was laid out (mesh and per-dimension mesh axis), and its
// blocks: one .npy file per distinct block (the first replica of each), with where the block
// starts in the global tensor, its shape, its size, its CRC-32 and the host that wrote it.
// Numpy reassembles a tensor by writing each block at its offset.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::checkpoint {

inline constexpr std::string_view kIndexFile = "index.json";
inline constexpr std::string_view kFormat = "atoll-checkpoint";
inline constexpr int kVersion = 1;

struct Block {
  std::string file;  // in the checkpoint's directory
  Shape offset;      // where the block starts in the global tensor
  Shape shape;
  uint64_t bytes = 0;  // the whole file's
  uint32_t crc32 = 0;  // the whole file's (zlib's crc32, as Python's zlib.crc32 gives)
  std::string host;    // whose store wrote it, under its own checkpoint root
  bool operator==(const Block&) const = default;
};

struct TensorEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  Shape mesh;                  // the devices it was laid over when saved
  std::vector<int32_t> split;  // per dimension: the mesh axis it was cut along, or -1
  std::vector<Block> blocks;   // disjoint, covering the tensor
  bool operator==(const TensorEntry&) const = default;
};

struct Index {
  std::vector<TensorEntry> tensors;
  // The tensor named `name`; NotFound naming the ones there are.
  Result<const TensorEntry*> Find(std::string_view name) const;
  bool operator==(const Index&) const = default;
};

// InvalidArgument unless `name` can name a tensor (and so its files): 1 to 128 letters,
// digits, '_', '-' or '.', not starting with '.'.
Status CheckTensorName(std::string_view name);
// InvalidArgument unless `name` can name a block file of a checkpoint: as a tensor name, up
// to 255 characters, ending in ".npy" (so never the index's name).
Status CheckFileName(std::string_view name);

// The file of block `block` of tensor `name` in the save tagged `tag`: "w1.0.5f3a9c1e.npy".
// Each save writes new names, so that a checkpoint saved over stays whole until the new
// index replaces the old one.
std::string BlockFileName(std::string_view name, size_t block, std::string_view tag);

std::string IndexToJson(const Index& index);
// Parses and checks an index: InvalidArgument naming what is wrong for anything but what
// IndexToJson writes of a consistent index (known dtypes, blocks inside their tensors,
// disjoint and covering them, names that CheckTensorName and CheckFileName accept).
Result<Index> IndexFromJson(std::string_view text);

}  // namespace atl::checkpoint
