// The dtype table (atoll/dtypes.def) as tensors see it: names both ways, sizes, classes, and
// values of every dtype made from doubles and read back, printed as the CLI prints them.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "atoll/tensor.h"
#include "tests/kernels/test_tensors.h"

namespace atl {
namespace {

using ::testing::HasSubstr;

TEST(DTypeTest, EveryRowHasItsNameSizeAndClassAndOldCodesStay) {
  struct Row {
    DType dtype;
    const char* name;
    size_t bytes;
    DTypeClass cls;
  };
  const std::vector<Row> rows = {{DType::kF32, "f32", 4, DTypeClass::kFloat},
                                 {DType::kI32, "i32", 4, DTypeClass::kInteger},
                                 {DType::kBF16, "bf16", 2, DTypeClass::kStorage},
                                 {DType::kF16, "f16", 2, DTypeClass::kStorage},
                                 {DType::kF64, "f64", 8, DTypeClass::kFloat},
                                 {DType::kI64, "i64", 8, DTypeClass::kInteger},
                                 {DType::kBool, "bool", 1, DTypeClass::kBool},
                                 {DType::kI8, "i8", 1, DTypeClass::kInteger},
                                 {DType::kU8, "u8", 1, DTypeClass::kInteger},
                                 {DType::kU32, "u32", 4, DTypeClass::kInteger}};
  ASSERT_EQ(rows.size(), kNumDTypes);
  for (size_t code = 0; code < rows.size(); ++code) {
    const Row& row = rows[code];
    SCOPED_TRACE(row.name);
    EXPECT_EQ(static_cast<size_t>(row.dtype), code);  // the wire encoding: appended only
    EXPECT_EQ(DTypeName(row.dtype), row.name);
    EXPECT_EQ(*ParseDType(row.name), row.dtype);
    EXPECT_EQ(DTypeSize(row.dtype), row.bytes);
    EXPECT_EQ(ClassOf(row.dtype), row.cls);
    EXPECT_EQ(IsFloating(row.dtype),
              row.cls == DTypeClass::kFloat || row.cls == DTypeClass::kStorage);
  }
  const auto unknown = static_cast<DType>(kNumDTypes);
  EXPECT_EQ(DTypeName(unknown), "?");
  EXPECT_EQ(DTypeSize(unknown), 0u);
  const Result<DType> bad = ParseDType("float16");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("known: f32, i32, bf16, f16, f64, i64"));
}

TEST(DTypeTest, FromDoublesRoundsOnceIntoFloatsAndRefusesNonIntegers) {
  const std::vector<double> v = {1.0 / 3, -2.5, 1e-40, 70000};
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor b, Tensor::FromDoubles(DType::kBF16, {4}, v));
  EXPECT_EQ(b.nbytes(), 8u);
  EXPECT_EQ(b.ToDoubles(), (std::vector<double>{0x1.56p-2, -2.5, 0x1p-133, 70144}));
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor h, Tensor::FromDoubles(DType::kF16, {4}, v));
  EXPECT_EQ(h.ToDoubles(), (std::vector<double>{0x1.554p-2, -2.5, 0, INFINITY}));
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor d, Tensor::FromDoubles(DType::kF64, {4}, v));
  EXPECT_EQ(d.ToDoubles(), v);
  ATOLL_ASSERT_OK_AND_ASSIGN(const Tensor i,
                             Tensor::FromDoubles(DType::kI64, {2}, {-0x1p62, 0x1p53 + 2}));
  EXPECT_EQ(i.as<int64_t>()[0], -(int64_t{1} << 62));
  EXPECT_EQ(i.as<int64_t>()[1], (int64_t{1} << 53) + 2);
  for (const auto& [dtype, value] : std::vector<std::pair<DType, double>>{
           {DType::kI32, 0.5}, {DType::kI32, 0x1p31}, {DType::kI64, 0x1p63}, {DType::kI64, NAN}}) {
    const Result<Tensor> t = Tensor::FromDoubles(dtype, {1}, {value});
    ASSERT_FALSE(t.ok()) << DTypeName(dtype) << " " << value;
    EXPECT_THAT(t.status().message(), HasSubstr("value 0"));
  }
  EXPECT_FALSE(Tensor::FromDoubles(DType::kF32, {3}, {1, 2}).ok());  // a count that differs
}

TEST(DTypeTest, EveryDTypePrintsItsValues) {
  EXPECT_EQ(Tensor::FromDoubles(DType::kBF16, {2}, {1.5, -3}).value().ToString(),
            "bf16[2] {1.5, -3}");
  EXPECT_EQ(Tensor::FromDoubles(DType::kF16, {1}, {0.1}).value().ToString(),
            "f16[1] {0.0999755859375}");
  EXPECT_EQ(Tensor::F64({2}, {0.1, 2}).ToString(), "f64[2] {0.1, 2}");
  EXPECT_EQ(Tensor::I64({1}, {int64_t{1} << 40}).ToString(), "i64[1] {1099511627776}");
}

}  // namespace
}  // namespace atl
