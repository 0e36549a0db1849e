#include "common/checkpoint/npy.h"

#include <cctype>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>

#include <fmt/format.h>

namespace atl::checkpoint {

namespace {

// One row per dtype (every dtype can be saved): its numpy descr, little-endian as every
// atoll host is. bf16 is 'bfloat16', the name ml_dtypes (JAX's dtypes) registers with numpy:
// np.load reads such a file as ml_dtypes.bfloat16 once ml_dtypes is imported, and without it
// fails naming the type, rather than giving numbers of another type. (np.save itself writes
// ml_dtypes' arrays as '<V2', opaque bytes that load back as no number at all.)
struct NpyType {
  DType dtype;
  std::string_view descr;
};
constexpr NpyType kNpyTypes[] = {
    {DType::kF32, "<f4"}, {DType::kI32, "<i4"}, {DType::kBF16, "bfloat16"}, {DType::kF16, "<f2"},
    {DType::kF64, "<f8"}, {DType::kI64, "<i8"}, {DType::kBool, "|b1"},      {DType::kI8, "|i1"},
    {DType::kU8, "|u1"},  {DType::kU32, "<u4"},
};
static_assert(std::size(kNpyTypes) == kNumDTypes, "a new dtype needs its .npy descr here");
// What atoll 0.1 wrote for bf16 before ml_dtypes: the raw bits as uint16. Still read, so that
// those checkpoints load.
constexpr NpyType kLegacyBF16 = {DType::kBF16, "<u2"};

std::string KnownDescrs() {
  std::string known;
  for (const NpyType& t : kNpyTypes) {
    known += fmt::format("{}{} ({})", known.empty() ? "" : ", ", t.descr, DTypeName(t.dtype));
  }
  return known;
}

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kAlignment = 64;  // numpy pads the header so that the data starts aligned

// Reads the dict literal of a header: {'key': value, ...} with values a quoted string,
// True/False, or a tuple of integers.
class DictReader {
 public:
  explicit DictReader(std::string_view text) : text_(text) {}

  Status Read(NpyHeader& out) {
    std::optional<std::string> descr;
    std::optional<bool> fortran;
    std::optional<Shape> shape;
    SkipSpace();
    if (!Take('{')) return Error("does not start with '{'");
    while (true) {
      SkipSpace();
      if (Take('}')) break;
      ATOLL_ASSIGN_OR_RETURN(const std::string key, ReadString());
      SkipSpace();
      if (!Take(':')) return Error("has no ':' after '" + key + "'");
      SkipSpace();
      if (key == "descr") {
        ATOLL_ASSIGN_OR_RETURN(descr, ReadString());
      } else if (key == "fortran_order") {
        ATOLL_ASSIGN_OR_RETURN(fortran, ReadBool());
      } else if (key == "shape") {
        ATOLL_ASSIGN_OR_RETURN(shape, ReadTuple());
      } else {
        return Error("has a key '" + key + "' (an .npy header has descr, fortran_order, shape)");
      }
      SkipSpace();
      if (!Take(',')) {
        SkipSpace();
        if (!Take('}')) return Error("has no ',' or '}' after '" + key + "'");
        break;
      }
    }
    if (!descr || !fortran || !shape) {
      return Error("lacks one of descr, fortran_order and shape");
    }
    if (*fortran) {
      return InvalidArgument(
          "the .npy file is in Fortran order; atoll reads C-ordered arrays "
          "(numpy.ascontiguousarray before numpy.save)");
    }
    ATOLL_ASSIGN_OR_RETURN(out.dtype, DTypeOfNpyDescr(*descr));
    out.shape = std::move(*shape);
    return Status::Ok();
  }

 private:
  Status Error(const std::string& what) const {
    return InvalidArgument("the .npy header " + what + ": " + std::string(text_.substr(0, 200)));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Take(char c) {
    if (pos_ >= text_.size() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  Result<std::string> ReadString() {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      return Error("has a key or value that is not a quoted string");
    }
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return Error("has an unterminated string");
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  Result<bool> ReadBool() {
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const std::string_view w(word);
      if (text_.substr(pos_, w.size()) == w) {
        pos_ += w.size();
        return value;
      }
    }
    return Error("has a fortran_order that is neither True nor False");
  }
  Result<Shape> ReadTuple() {
    if (!Take('(')) return Error("has a shape that is not a tuple");
    Shape shape;
    while (true) {
      SkipSpace();
      if (Take(')')) return shape;
      int64_t d = 0;
      size_t digits = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        const int digit = text_[pos_++] - '0';
        if (d > (std::numeric_limits<int64_t>::max() - digit) / 10) {
          return Error("has a dimension too large for an int64");
        }
        d = d * 10 + digit;
        ++digits;
      }
      if (digits == 0) return Error("has a shape entry that is not a non-negative integer");
      shape.push_back(d);
      SkipSpace();
      if (!Take(',')) {
        if (!Take(')')) return Error("has a shape tuple without ',' or ')'");
        return shape;
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::string_view> NpyDescr(DType dtype) {
  for (const NpyType& t : kNpyTypes) {
    if (t.dtype == dtype) return t.descr;
  }
  return InvalidArgument(fmt::format("dtype {} has no .npy descr (checkpoints hold {})",
                                     DTypeName(dtype), KnownDescrs()));
}

Result<DType> DTypeOfNpyDescr(std::string_view descr) {
  for (const NpyType& t : kNpyTypes) {
    if (t.descr == descr) return t.dtype;
  }
  if (descr == kLegacyBF16.descr) return kLegacyBF16.dtype;
  return InvalidArgument(
      fmt::format("the .npy descr '{}' is not one atoll reads ({})", descr, KnownDescrs()));
}

Result<std::string> EncodeNpyHeader(DType dtype, const Shape& shape) {
  ATOLL_ASSIGN_OR_RETURN(const std::string_view descr, NpyDescr(dtype));
  ATOLL_RETURN_IF_ERROR(CheckedNumBytes(dtype, shape).status());
  std::string dims;
  for (int64_t d : shape) dims += fmt::format("{}{}", dims.empty() ? "" : ", ", d);
  if (shape.size() == 1) dims += ",";
  std::string dict =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  // Magic (6) + version (2) + header length (2), then the dict padded so that the data
  // starts on a multiple of 64 bytes, ended by a newline.
  const size_t prefix = kMagic.size() + 4;
  const size_t unpadded = prefix + dict.size() + 1;
  dict.append((kAlignment - unpadded % kAlignment) % kAlignment, ' ');
  dict += '\n';
  if (dict.size() > std::numeric_limits<uint16_t>::max()) {
    return InvalidArgument("shape " + ShapeString(shape) + " makes an .npy header over 64 KiB");
  }
  std::string header(kMagic);
  header += '\x01';
  header += '\x00';
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>(dict.size() >> 8);
  return header + dict;
}

Result<NpyHeader> ParseNpyHeader(std::span<const std::byte> file) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(file[i]); };
  if (file.size() < kMagic.size() + 4 ||
      std::memcmp(file.data(), kMagic.data(), kMagic.size()) != 0) {
    return InvalidArgument("not an .npy file (no \\x93NUMPY magic)");
  }
  const uint8_t major = byte(6);
  size_t length = 0;
  size_t start = 0;
  if (major == 1) {
    length = byte(8) | (size_t{byte(9)} << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (file.size() < 12) return InvalidArgument("the .npy header is truncated");
    length = byte(8) | (size_t{byte(9)} << 8) | (size_t{byte(10)} << 16) | (size_t{byte(11)} << 24);
    start = 12;
  } else {
    return InvalidArgument(
        fmt::format("the .npy format version {}.{} is not one atoll reads "
                    "(1.0, 2.0, 3.0)",
                    major, byte(7)));
  }
  if (file.size() - start < length) {
    return InvalidArgument(fmt::format("the .npy header says {} bytes, the file has {} after it",
                                       length, file.size() - start));
  }
  NpyHeader header;
  const std::string_view text(reinterpret_cast<const char*>(file.data()) + start, length);
  ATOLL_RETURN_IF_ERROR(DictReader(text).Read(header));
  ATOLL_RETURN_IF_ERROR(CheckedNumBytes(header.dtype, header.shape).status());
  header.data_offset = start + length;
  return header;
}

Result<Tensor> ParseNpy(std::span<const std::byte> file) {
  ATOLL_ASSIGN_OR_RETURN(const NpyHeader header, ParseNpyHeader(file));
  ATOLL_ASSIGN_OR_RETURN(const uint64_t nbytes, CheckedNumBytes(header.dtype, header.shape));
  const uint64_t data = file.size() - header.data_offset;
  if (data != nbytes) {
    return InvalidArgument(
        fmt::format("the .npy file holds {} bytes of data, its header ({}{}) says {}: it is {}",
                    data, DTypeName(header.dtype), ShapeString(header.shape), nbytes,
                    data < nbytes ? "truncated" : "longer than its array"));
  }
  const auto bytes = file.subspan(header.data_offset);
  return Tensor::FromBytes(header.dtype, header.shape, {bytes.begin(), bytes.end()});
}

}  // namespace atl::checkpoint
