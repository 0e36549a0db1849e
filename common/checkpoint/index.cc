#include "common/checkpoint/index.h"

#include <algorithm>
#include <set>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/checkpoint/npy.h"

namespace atl::checkpoint {

namespace {

using nlohmann::json;

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

Status CheckName(std::string_view what, std::string_view name, size_t max) {
  if (name.empty() || name.size() > max || name.front() == '.' ||
      !std::all_of(name.begin(), name.end(), NameChar)) {
    return InvalidArgument(fmt::format(
        "'{}' cannot name a {}: use 1 to {} letters, digits, '_', '-' or '.', not starting "
        "with '.'",
        name.substr(0, 300), what, max));
  }
  return Status::Ok();
}

template <typename T>
struct ElementOf {
  using type = T;
};
template <typename T>
struct ElementOf<std::vector<T>> {
  using type = T;
};

// True when `v` is a whole number that Int holds. nlohmann's get<Int> casts any number
// without a word: 4.5 to 4, and a float beyond Int's range is undefined behaviour.
template <typename Int>
bool HoldsWhole(const json& v) {
  if (v.is_number_unsigned()) return std::in_range<Int>(v.get<uint64_t>());
  if (v.is_number_integer()) return std::in_range<Int>(v.get<int64_t>());
  return false;
}

// Reads `j[key]` as T, or InvalidArgument naming `where` and the key. The numbers of an
// integer T (or of a vector of them) must be whole and in its range.
template <typename T>
Result<T> Field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) {
    return InvalidArgument(fmt::format("the checkpoint index: {} has no '{}'", where, key));
  }
  const json& v = j.at(key);
  const auto wrong = [&] {
    return InvalidArgument(
        fmt::format("the checkpoint index: {}'s '{}' is not what it should be: {}", where, key,
                    v.dump().substr(0, 200)));
  };
  using Element = typename ElementOf<T>::type;
  if constexpr (std::is_integral_v<Element>) {
    const bool whole = v.is_array() ? std::all_of(v.begin(), v.end(), HoldsWhole<Element>)
                                    : HoldsWhole<Element>(v);
    if (!whole) return wrong();
  }
  try {
    return v.get<T>();
  } catch (const json::exception& e) {
    return wrong();
  }
}

// True when the boxes [a, a + as) and [b, b + bs) share an element.
bool Overlap(const Shape& a, const Shape& as, const Shape& b, const Shape& bs) {
  for (size_t d = 0; d < a.size(); ++d) {
    if (a[d] + as[d] <= b[d] || b[d] + bs[d] <= a[d]) return false;
  }
  return true;
}

Status CheckBlocks(const TensorEntry& t, const std::string& where) {
  if (t.blocks.empty()) return InvalidArgument("the checkpoint index: " + where + " has no blocks");
  ATOLL_ASSIGN_OR_RETURN(const int64_t total, CheckedNumElements(t.shape));
  int64_t covered = 0;
  for (size_t i = 0; i < t.blocks.size(); ++i) {
    const Block& b = t.blocks[i];
    const std::string block = fmt::format("{} block {} ({})", where, i, b.file);
    ATOLL_RETURN_IF_ERROR(CheckFileName(b.file).WithContext("the checkpoint index: " + block));
    if (b.offset.size() != t.shape.size() || b.shape.size() != t.shape.size()) {
      return InvalidArgument(
          fmt::format("the checkpoint index: {} has offset {} and shape {} "
                      "for a tensor of rank {}",
                      block, ShapeString(b.offset), ShapeString(b.shape), t.shape.size()));
    }
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (b.offset[d] < 0 || b.shape[d] < 1 || b.offset[d] > t.shape[d] - b.shape[d]) {
        return InvalidArgument(
            fmt::format("the checkpoint index: {} at {} of shape {} does not "
                        "lie inside the tensor's {}",
                        block, ShapeString(b.offset), ShapeString(b.shape), ShapeString(t.shape)));
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (Overlap(b.offset, b.shape, t.blocks[j].offset, t.blocks[j].shape)) {
        return InvalidArgument(fmt::format("the checkpoint index: {} overlaps block {}", block, j));
      }
    }
    covered += NumElements(b.shape);  // each inside the tensor: no overflow
  }
  if (covered != total) {
    return InvalidArgument(fmt::format(
        "the checkpoint index: {}'s blocks cover {} of its {} elements", where, covered, total));
  }
  return Status::Ok();
}

Result<TensorEntry> TensorFromJson(const json& j, size_t i) {
  std::string where = fmt::format("tensor {}", i);
  TensorEntry t;
  ATOLL_ASSIGN_OR_RETURN(t.name, Field<std::string>(j, "name", where));
  ATOLL_RETURN_IF_ERROR(CheckTensorName(t.name).WithContext("the checkpoint index"));
  where = fmt::format("tensor '{}'", t.name);
  ATOLL_ASSIGN_OR_RETURN(const std::string dtype, Field<std::string>(j, "dtype", where));
  ATOLL_ASSIGN_OR_RETURN(t.dtype, ParseDType(dtype));
  ATOLL_ASSIGN_OR_RETURN(const std::string descr, Field<std::string>(j, "descr", where));
  ATOLL_ASSIGN_OR_RETURN(const std::string_view want, NpyDescr(t.dtype));
  // A bf16 tensor saved before ml_dtypes has '<u2' (common/checkpoint/npy.cc).
  const Result<DType> legacy = DTypeOfNpyDescr(descr);
  if (descr != want && !(legacy.ok() && *legacy == t.dtype)) {
    return InvalidArgument(fmt::format("the checkpoint index: {} is {} with descr '{}', not '{}'",
                                       where, dtype, descr, want));
  }
  ATOLL_ASSIGN_OR_RETURN(t.shape, Field<Shape>(j, "shape", where));
  ATOLL_ASSIGN_OR_RETURN(t.mesh, Field<Shape>(j, "mesh", where));
  ATOLL_ASSIGN_OR_RETURN(t.split, Field<std::vector<int32_t>>(j, "split", where));
  for (int64_t d : t.shape) {
    if (d < 1) {
      return InvalidArgument(
          fmt::format("the checkpoint index: {} has shape {}", where, ShapeString(t.shape)));
    }
  }
  ATOLL_RETURN_IF_ERROR(CheckedNumBytes(t.dtype, t.shape).status());
  const bool mesh_ok =
      !t.mesh.empty() && std::all_of(t.mesh.begin(), t.mesh.end(), [](int64_t a) { return a > 0; });
  const bool split_ok = t.split.size() == t.shape.size() &&
                        std::all_of(t.split.begin(), t.split.end(), [&](int32_t a) {
                          return a >= -1 && a < static_cast<int32_t>(t.mesh.size());
                        });
  if (!mesh_ok || !split_ok) {
    return InvalidArgument(fmt::format("the checkpoint index: {} has mesh {} and split {}", where,
                                       ShapeString(t.mesh), json(t.split).dump()));
  }
  ATOLL_ASSIGN_OR_RETURN(const json blocks, Field<json>(j, "blocks", where));
  if (!blocks.is_array()) {
    return InvalidArgument("the checkpoint index: " + where + "'s 'blocks' is not a list");
  }
  for (size_t b = 0; b < blocks.size(); ++b) {
    const std::string block = fmt::format("{} block {}", where, b);
    Block out;
    ATOLL_ASSIGN_OR_RETURN(out.file, Field<std::string>(blocks[b], "file", block));
    ATOLL_ASSIGN_OR_RETURN(out.offset, Field<Shape>(blocks[b], "offset", block));
    ATOLL_ASSIGN_OR_RETURN(out.shape, Field<Shape>(blocks[b], "shape", block));
    ATOLL_ASSIGN_OR_RETURN(out.bytes, Field<uint64_t>(blocks[b], "bytes", block));
    ATOLL_ASSIGN_OR_RETURN(out.crc32, Field<uint32_t>(blocks[b], "crc32", block));
    ATOLL_ASSIGN_OR_RETURN(out.host, Field<std::string>(blocks[b], "host", block));
    t.blocks.push_back(std::move(out));
  }
  ATOLL_RETURN_IF_ERROR(CheckBlocks(t, where));
  return t;
}

}  // namespace

Status CheckTensorName(std::string_view name) { return CheckName("tensor", name, 128); }

Status CheckFileName(std::string_view name) {
  ATOLL_RETURN_IF_ERROR(CheckName("checkpoint file", name, 255));
  if (!name.ends_with(".npy")) {
    return InvalidArgument(
        fmt::format("'{}' cannot name a checkpoint file: those end in .npy", name));
  }
  return Status::Ok();
}

std::string BlockFileName(std::string_view name, size_t block, std::string_view tag) {
  return fmt::format("{}.{}.{}.npy", name, block, tag);
}

Result<const TensorEntry*> Index::Find(std::string_view name) const {
  std::string names;
  for (const TensorEntry& t : tensors) {
    if (t.name == name) return &t;
    names += (names.empty() ? "" : ", ") + t.name;
  }
  return NotFound(fmt::format("the checkpoint has no tensor '{}' (it has {})", name,
                              names.empty() ? "none" : names));
}

std::string IndexToJson(const Index& index) {
  json tensors = json::array();
  for (const TensorEntry& t : index.tensors) {
    json blocks = json::array();
    for (const Block& b : t.blocks) {
      blocks.push_back({{"file", b.file},
                        {"offset", b.offset},
                        {"shape", b.shape},
                        {"bytes", b.bytes},
                        {"crc32", b.crc32},
                        {"host", b.host}});
    }
    const Result<std::string_view> descr = NpyDescr(t.dtype);
    tensors.push_back({{"name", t.name},
                       {"dtype", DTypeName(t.dtype)},
                       {"descr", descr.ok() ? std::string(*descr) : std::string("?")},
                       {"shape", t.shape},
                       {"mesh", t.mesh},
                       {"split", t.split},
                       {"blocks", std::move(blocks)}});
  }
  const json j = {{"format", kFormat}, {"version", kVersion}, {"tensors", std::move(tensors)}};
  return j.dump(1) + "\n";
}

Result<Index> IndexFromJson(std::string_view text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("the checkpoint index is not valid JSON");
  ATOLL_ASSIGN_OR_RETURN(const std::string format, Field<std::string>(j, "format", "the index"));
  ATOLL_ASSIGN_OR_RETURN(const int version, Field<int>(j, "version", "the index"));
  if (format != kFormat || version != kVersion) {
    return InvalidArgument(
        fmt::format("the checkpoint index is format '{}' version {}; atoll "
                    "reads '{}' version {}",
                    format, version, kFormat, kVersion));
  }
  ATOLL_ASSIGN_OR_RETURN(const json tensors, Field<json>(j, "tensors", "the index"));
  if (!tensors.is_array()) return InvalidArgument("the checkpoint index's 'tensors' is not a list");
  Index index;
  std::set<std::string> names;
  for (size_t i = 0; i < tensors.size(); ++i) {
    ATOLL_ASSIGN_OR_RETURN(TensorEntry t, TensorFromJson(tensors[i], i));
    if (!names.insert(t.name).second) {
      return InvalidArgument("the checkpoint index names tensor '" + t.name + "' twice");
    }
    index.tensors.push_back(std::move(t));
  }
  return index;
}

}  // namespace atl::checkpoint
