// The .npy writer and reader against numpy itself (the venv's Python): the files
// atoll writes are byte for byte what numpy.save writes, numpy reads them, atoll reads what
// numpy writes, and every file atoll cannot read is refused by name.
#include "common/checkpoint/npy.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/common/checkpoint/numpy_python.h"
#include "tests/status_matchers.h"

namespace atl::checkpoint {
namespace {

using testing::HaveNumpy;
using testing::RunPython;

std::vector<std::byte> FromHex(const std::string& hex) {
  std::vector<std::byte> bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<std::byte>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

std::string Hex(const std::vector<std::byte>& bytes) {
  std::string hex;
  for (std::byte b : bytes) hex += fmt::format("{:02x}", static_cast<unsigned>(b));
  return hex;
}

std::vector<std::byte> NpyFile(const Tensor& t) {
  auto header = EncodeNpyHeader(t.dtype(), t.shape());
  EXPECT_THAT(header, IsOk());
  std::vector<std::byte> file(header.ok() ? header->size() : 0);
  if (header.ok()) std::memcpy(file.data(), header->data(), header->size());
  file.insert(file.end(), t.data(), t.data() + t.nbytes());
  return file;
}

class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveNumpy()) GTEST_SKIP() << ATOLL_PYTHON " has no numpy (scripts/setup.sh)";
  }
};

// What numpy.save writes for each array, as hex, and what atoll writes.
const struct {
  const char* numpy;  // a Python expression
  Tensor tensor;
} kArrays[] = {
    {"np.arange(6, dtype=np.float32).reshape(2, 3) * 1.5",
     Tensor::F32({2, 3}, {0, 1.5, 3, 4.5, 6, 7.5})},
    {"np.array([-2, 7, 2**31 - 1], dtype=np.int32)", Tensor::I32({3}, {-2, 7, 2147483647})},
    {"np.array(3.25, dtype=np.float32)", Tensor::F32({}, {3.25})},
    {"np.ones((1, 2, 1, 2), dtype=np.int32)", Tensor::I32({1, 2, 1, 2}, {1, 1, 1, 1})},
    {"np.array([[0.5, -2.25], [65504, 2**-24]], dtype=np.float16)",
     Tensor::FromDoubles(DType::kF16, {2, 2}, {0.5, -2.25, 65504, 0x1p-24}).value()},
    {"np.array([1e300, -0.1, 2.0**-1074], dtype=np.float64)",
     Tensor::F64({3}, {1e300, -0.1, 0x1p-1074})},
    {"np.array([[-2**63, 2**63 - 1, 2**53 + 1]], dtype=np.int64)",
     Tensor::I64({1, 3}, {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                          (int64_t{1} << 53) + 1})},
};

TEST_F(NpyTest, WritesWhatNumpySaveWritesAndReadsIt) {
  for (const auto& a : kArrays) {
    const std::string hex = RunPython(
        "import io, sys, numpy as np\n"
        "f = io.BytesIO(); np.save(f, eval(sys.argv[1])); print(f.getvalue().hex())",
        {a.numpy});
    const std::vector<std::byte> numpy = FromHex(hex.substr(0, hex.find('\n')));
    EXPECT_EQ(NpyFile(a.tensor), numpy) << a.numpy;
    auto read = ParseNpy(numpy);
    ASSERT_THAT(read, IsOk()) << a.numpy << ": " << read.status().ToString();
    EXPECT_EQ(*read, a.tensor) << a.numpy;
  }
}

TEST_F(NpyTest, NumpyLoadsWhatItWrites) {
  for (const auto& a : kArrays) {
    const std::string hex = Hex(NpyFile(a.tensor));
    const std::string same = RunPython(
        "import io, sys, numpy as np\n"
        "a = np.load(io.BytesIO(bytes.fromhex(sys.argv[1])))\n"
        "want = eval(sys.argv[2])\n"
        "print(a.dtype == want.dtype and a.shape == want.shape and (a == want).all())",
        {hex, a.numpy});
    EXPECT_EQ(same, "True\n") << a.numpy;
  }
}

// A bf16 file is 'bfloat16' to numpy: with ml_dtypes imported np.load gives an
// ml_dtypes.bfloat16 array of the same bits as ml_dtypes' own rounding of the values (the
// oracle: atoll's rounding is round to nearest even, as is theirs), and without it numpy
// refuses the file naming the type.
TEST_F(NpyTest, NumpyWithMlDtypesLoadsBF16BitForBit) {
  const std::vector<double> values = {1.5, -0.0078125, 3.0e38, -1e-40, 0.1, 300.7, INFINITY};
  const Tensor bf16 = Tensor::FromDoubles(DType::kBF16, {7}, values).value();
  std::string literal;
  for (double v : values) literal += fmt::format("float('{}'), ", v);
  const std::string same = RunPython(
      "import io, sys, numpy as np, ml_dtypes\n"
      "a = np.load(io.BytesIO(bytes.fromhex(sys.argv[1])))\n"
      "want = np.array(eval(sys.argv[2]), np.float32).astype(ml_dtypes.bfloat16)\n"
      "print(a.dtype == ml_dtypes.bfloat16, (a.view(np.uint16) == want.view(np.uint16)).all())",
      {Hex(NpyFile(bf16)), "[" + literal + "]"});
  EXPECT_EQ(same, "True True\n");
  const std::string refused = RunPython(
      "import io, sys, numpy as np\n"
      "try:\n  np.load(io.BytesIO(bytes.fromhex(sys.argv[1])))\n"
      "except Exception as e:\n  print('bfloat16' in str(e))",
      {Hex(NpyFile(bf16))});
  EXPECT_EQ(refused, "True\n");
}

// A bf16 file as atoll wrote it before 'bfloat16': its raw bits as '<u2'.
TEST(NpyLegacyTest, ReadsBF16SavedAsRawBits) {
  const Tensor bf16 = Tensor::FromDoubles(DType::kBF16, {3}, {1.5, -3, INFINITY}).value();
  std::vector<std::byte> file = NpyFile(bf16);
  std::string bytes(reinterpret_cast<const char*>(file.data()), file.size());
  const size_t at = bytes.find("'bfloat16'");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 10, "'<u2'     ");  // same length: the data stays aligned
  const auto* begin = reinterpret_cast<const std::byte*>(bytes.data());
  auto read = ParseNpy(std::vector<std::byte>(begin, begin + bytes.size()));
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(*read, bf16);
}

// A file of format version `major`.0 with header `dict` (padded as numpy pads) and `data`.
std::vector<std::byte> Handmade(const std::string& dict, size_t data_bytes, int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string file = "\x93NUMPY";
  file += static_cast<char>(major);
  file += '\0';
  for (size_t i = 0; i < prefix - 8; ++i)
    file += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  file += header;
  std::vector<std::byte> bytes(file.size() + data_bytes);
  std::memcpy(bytes.data(), file.data(), file.size());
  return bytes;
}

TEST(NpyRefusalTest, AnythingButACOrderedArrayOfAKnownDtypeIsRefusedByName) {
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  ASSERT_THAT(ParseNpy(Handmade(ok, 8)), IsOk());
  ASSERT_THAT(ParseNpy(Handmade(ok, 8, /*major=*/2)), IsOk()) << "format 2.0: a 4-byte length";
  ASSERT_THAT(
      ParseNpy(Handmade("{\"shape\": (2,), \"descr\": \"<i4\", \"fortran_order\": False}", 8)),
      IsOk())
      << "keys in any order, either quote";
  const struct {
    std::vector<std::byte> file;
    const char* says;
  } cases[] = {
      {{std::byte{'h'}, std::byte{'i'}}, "magic"},
      {Handmade(ok, 8, /*major=*/9), "version 9.0"},
      {Handmade("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8), "'>f4'"},
      {Handmade("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16), "'<c8'"},
      {Handmade("{'descr': '<u8', 'fortran_order': False, 'shape': (2,), }", 16), "'<u8'"},
      {Handmade("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8), "Fortran"},
      {Handmade("{'descr': '<f4', 'fortran_order': False, }", 8), "lacks"},
      {Handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1, }", 8), "'x'"},
      {Handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }", 8), "shape"},
      {Handmade("{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", 8), "tuple"},
      {Handmade("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", 8), "True nor False"},
      {Handmade(ok, 4), "truncated"},
      {Handmade(ok, 12), "longer"},
  };
  for (const auto& c : cases) {
    auto read = ParseNpy(c.file);
    ASSERT_FALSE(read.ok()) << c.says;
    EXPECT_EQ(read.status().code(), Code::kInvalidArgument) << read.status().ToString();
    EXPECT_NE(read.status().message().find(c.says), std::string::npos) << read.status().ToString();
  }
  auto header = Handmade(ok, 0);
  header.resize(header.size() - 20);
  EXPECT_EQ(ParseNpy(header).status().code(), Code::kInvalidArgument) << "header cut short";
}

TEST(NpyRefusalTest, TheDescrTableHasEveryDtypeBothWays) {
  const struct {
    DType dtype;
    const char* descr;
  } rows[] = {{DType::kF32, "<f4"}, {DType::kI32, "<i4"}, {DType::kBF16, "bfloat16"},
              {DType::kF16, "<f2"}, {DType::kF64, "<f8"}, {DType::kI64, "<i8"}};
  for (const auto& r : rows) {
    EXPECT_EQ(NpyDescr(r.dtype).value(), r.descr) << DTypeName(r.dtype);
    EXPECT_EQ(DTypeOfNpyDescr(r.descr).value(), r.dtype) << r.descr;
  }
  auto unknown = DTypeOfNpyDescr("<u8");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find(
                "<f4 (f32), <i4 (i32), bfloat16 (bf16), <f2 (f16), <f8 (f64), <i8 (i64)"),
            std::string::npos)
      << unknown.status().ToString();
}

}  // namespace
}  // namespace atl::checkpoint
