// The checkpoint index: what IndexToJson writes reads back equal, every inconsistency is
// refused by name, and the lines README gives a numpy user reassemble the global arrays
// from the blocks (run with the venv's Python).
#include "common/checkpoint/index.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/base/tensor_block.h"
#include "common/checkpoint/npy.h"
#include "tests/common/checkpoint/numpy_python.h"
#include "tests/status_matchers.h"

namespace atl::checkpoint {
namespace {

using nlohmann::json;

// w: f32[4, 6] cut into 2 x 2 blocks; step: an i32 scalar.
Index Sample() {
  Index index;
  TensorEntry w{"w", DType::kF32, {4, 6}, {2, 2}, {0, 1}, {}};
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t c = 0; c < 2; ++c) {
      w.blocks.push_back({BlockFileName("w", w.blocks.size(), "00c0ffee"),
                          {2 * r, 3 * c},
                          {2, 3},
                          152,
                          0x1234u + static_cast<uint32_t>(r),
                          "h" + std::to_string(c)});
    }
  }
  index.tensors.push_back(std::move(w));
  index.tensors.push_back(
      {"step", DType::kI32, {}, {1}, {}, {{"step.0.00c0ffee.npy", {}, {}, 132, 7, "h0"}}});
  return index;
}

TEST(IndexTest, WhatIsWrittenReadsBackEqual) {
  const Index index = Sample();
  auto read = IndexFromJson(IndexToJson(index));
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(*read, index);
  const json j = json::parse(IndexToJson(index));
  EXPECT_EQ(j["format"], "atoll-checkpoint");
  EXPECT_EQ(j["tensors"][0]["descr"], "<f4");
  EXPECT_EQ(j["tensors"][1]["descr"], "<i4");
  EXPECT_EQ(BlockFileName("w", 3, "00c0ffee"), "w.3.00c0ffee.npy");
  ASSERT_THAT(read->Find("step"), IsOk());
  EXPECT_EQ(read->Find("b").status().code(), Code::kNotFound);
  EXPECT_NE(read->Find("b").status().message().find("it has w, step"), std::string::npos);
}

TEST(IndexTest, InconsistentIndexesAreRefusedNamingWhatIsWrong) {
  const json good = json::parse(IndexToJson(Sample()));
  const struct {
    std::function<void(json&)> spoil;
    const char* says;
  } cases[] = {
      {[](json& j) { j["format"] = "other"; }, "format 'other'"},
      {[](json& j) { j["version"] = 2; }, "version 2"},
      {[](json& j) { j.erase("tensors"); }, "no 'tensors'"},
      {[](json& j) { j["tensors"][1]["name"] = "w"; }, "'w' twice"},
      {[](json& j) { j["tensors"][0]["name"] = "../w"; }, "cannot name a tensor"},
      {[](json& j) { j["tensors"][0]["dtype"] = "c128"; }, "unknown dtype 'c128'"},
      {[](json& j) { j["tensors"][0]["descr"] = ">f4"; }, "descr '>f4'"},
      {[](json& j) { j["tensors"][0]["dtype"] = "bf16"; }, "bf16 with descr '<f4', not 'bfloat16'"},
      {[](json& j) { j["tensors"][1]["descr"] = "<i8"; }, "i32 with descr '<i8', not '<i4'"},
      {[](json& j) { j["tensors"][0]["shape"] = "big"; }, "'shape'"},
      {[](json& j) { j["tensors"][0]["shape"][0] = 0; }, "has shape"},
      // Numbers that are not whole, or that the field's type does not hold (a float beyond
      // int64 was undefined behaviour, found by checkpoint_fuzzer).
      {[](json& j) { j["tensors"][0]["shape"][1] = 2e35; }, "'shape' is not what"},
      {[](json& j) { j["tensors"][0]["shape"][1] = 6.5; }, "'shape' is not what"},
      {[](json& j) { j["tensors"][0]["split"][0] = uint64_t{1} << 40; }, "'split' is not what"},
      {[](json& j) { j["tensors"][0]["blocks"][0]["crc32"] = -1; }, "'crc32' is not what"},
      {[](json& j) { j["tensors"][0]["blocks"][0]["bytes"] = 1e300; }, "'bytes' is not what"},
      {[](json& j) { j["version"] = 1.0; }, "'version' is not what"},
      {[](json& j) {
         j["tensors"][0]["split"] = {0, 2};
       },
       "split"},
      {[](json& j) { j["tensors"][0]["blocks"][1]["file"] = "a/b.npy"; }, "checkpoint file"},
      {[](json& j) { j["tensors"][0]["blocks"][1]["file"] = "index.json"; }, "end in .npy"},
      {[](json& j) {
         j["tensors"][0]["blocks"][1]["offset"] = {0, 4};
       },
       "does not lie inside"},
      {[](json& j) {
         j["tensors"][0]["blocks"][1]["offset"] = {0, 2};
       },
       "overlaps block 0"},
      {[](json& j) { j["tensors"][0]["blocks"].erase(3); }, "cover 18 of its 24"},
      {[](json& j) { j["tensors"][0]["blocks"][0].erase("crc32"); }, "no 'crc32'"},
  };
  for (const auto& c : cases) {
    json spoilt = good;
    c.spoil(spoilt);
    auto read = IndexFromJson(spoilt.dump());
    ASSERT_FALSE(read.ok()) << c.says;
    EXPECT_EQ(read.status().code(), Code::kInvalidArgument) << read.status().ToString();
    EXPECT_NE(read.status().message().find(c.says), std::string::npos) << read.status().ToString();
  }
  EXPECT_EQ(IndexFromJson("{not json").status().code(), Code::kInvalidArgument);
}

TEST(IndexTest, NamesAreFileNamesThatStayInTheirDirectory) {
  for (const char* name : {"w1", "layer.0.w", "b-2_x"}) EXPECT_THAT(CheckTensorName(name), IsOk());
  for (const char* name : {"", ".", "..", ".hidden", "a/b", "a b", "é"}) {
    EXPECT_EQ(CheckTensorName(name).code(), Code::kInvalidArgument) << name;
  }
  EXPECT_FALSE(CheckTensorName(std::string(129, 'a')).ok());
}

// Writes `t`'s blocks as the store would and the index, then reads them with README's
// numpy lines.
TEST(IndexTest, NumpyReassemblesTheGlobalArraysWithReadmesLines) {
  if (!testing::HaveNumpy()) GTEST_SKIP() << ATOLL_PYTHON " has no numpy (scripts/setup.sh)";
  char dir_template[] = "/tmp/atoll-index-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  std::vector<float> values(24);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i);
  const Tensor w = Tensor::F32({4, 6}, values);
  Index index = Sample();
  for (Block& b : index.tensors[0].blocks) {
    auto block = ExtractBlock(w, b.offset, b.shape);
    ASSERT_THAT(block, IsOk());
    auto header = EncodeNpyHeader(DType::kF32, b.shape);
    ASSERT_THAT(header, IsOk());
    std::ofstream out(dir + "/" + b.file, std::ios::binary);
    out << *header;
    out.write(reinterpret_cast<const char*>(block->data()),
              static_cast<std::streamsize>(block->nbytes()));
  }
  {
    auto header = EncodeNpyHeader(DType::kI32, {});
    std::ofstream out(dir + "/" + index.tensors[1].blocks[0].file, std::ios::binary);
    const int32_t step = 42;
    out << *header;
    out.write(reinterpret_cast<const char*>(&step), sizeof(step));
  }
  std::ofstream(dir + "/" + std::string(kIndexFile)) << IndexToJson(index);
  const testing::CommandResult read =
      testing::RunCommand({testing::kPython, testing::kReadCheckpointScript, dir});
  std::filesystem::remove_all(dir);
  ASSERT_EQ(read.exit_code, 0) << read.Describe();
  const json got = json::parse(read.out);
  EXPECT_EQ(got["w"]["descr"], "<f4");
  EXPECT_EQ(got["w"]["shape"], json({4, 6}));
  EXPECT_EQ(got["w"]["values"].get<std::vector<float>>(), values);
  EXPECT_EQ(got["step"]["descr"], "<i4");
  EXPECT_EQ(got["step"]["shape"], json::array());
  EXPECT_EQ(got["step"]["values"], json({42}));
}

}  // namespace
}  // namespace atl::checkpoint
