// PieceAssembler: blocks of a resharding edge and routed rows put together into whole
// consumer shards, and the errors a piece can carry or meet.
#include "services/executor/piece_assembler.h"

#include <gtest/gtest.h>

namespace atl::executor {
namespace {

proto::TupleHeader Block(Shape dst_begin, Shape dst_shape, uint32_t pieces) {
  proto::TupleHeader h;
  h.dst_begin = std::move(dst_begin);
  h.dst_shape = std::move(dst_shape);
  h.pieces = pieces;
  h.dtype = DType::kF32;
  return h;
}

proto::TupleHeader Rows(uint32_t part, uint32_t pieces) {
  proto::TupleHeader h;
  h.kind = proto::TupleHeader::kRows;
  h.part = part;
  h.pieces = pieces;
  return h;
}

TEST(PieceAssemblerTest, BlocksArePutTogetherIntoTheWholeShard) {
  PieceAssembler pieces;
  const InputKey key{7, 3, 0, 1};
  // A [2,2] shard from its two rows, the second arriving first.
  EXPECT_FALSE(pieces.Add(key, Block({1, 0}, {2, 2}, 2), Tensor::F32({1, 2}, {3, 4})));
  EXPECT_EQ(pieces.partial(), 1u);
  auto whole = pieces.Add(key, Block({0, 0}, {2, 2}, 2), Tensor::F32({1, 2}, {1, 2}));
  ASSERT_TRUE(whole.has_value());
  ASSERT_TRUE(whole->ok()) << whole->status().ToString();
  EXPECT_EQ(**whole, Tensor::F32({2, 2}, {1, 2, 3, 4}));
  EXPECT_EQ(pieces.partial(), 0u);
}

TEST(PieceAssemblerTest, ShardsAreKeptApartByKey) {
  PieceAssembler pieces;
  EXPECT_FALSE(pieces.Add({7, 3, 0, 0}, Block({0}, {2}, 2), Tensor::F32({1}, {1})));
  EXPECT_FALSE(pieces.Add({7, 3, 0, 1}, Block({0}, {2}, 2), Tensor::F32({1}, {5})));
  EXPECT_EQ(pieces.partial(), 2u);
  auto whole = pieces.Add({7, 3, 0, 1}, Block({1}, {2}, 2), Tensor::F32({1}, {6}));
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(**whole, Tensor::F32({2}, {5, 6}));
  EXPECT_EQ(pieces.partial(), 1u);
}

TEST(PieceAssemblerTest, AnErrorPieceIsTheShardsResultOnceEveryPieceCame) {
  PieceAssembler pieces;
  const InputKey key{7, 3, 0, 0};
  EXPECT_FALSE(pieces.Add(key, Block({0}, {2}, 2), Result<Tensor>(Internal("producer broke"))));
  auto whole = pieces.Add(key, Block({1}, {2}, 2), Tensor::F32({1}, {2}));
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->status().code(), Code::kInternal);
  EXPECT_EQ(whole->status().message(), "producer broke");
  EXPECT_EQ(pieces.partial(), 0u);
}

TEST(PieceAssemblerTest, APieceThatDoesNotFitFailsTheShard) {
  PieceAssembler pieces;
  const InputKey key{7, 3, 0, 0};
  EXPECT_FALSE(pieces.Add(key, Block({0}, {2}, 2), Tensor::F32({1}, {1})));
  auto whole = pieces.Add(key, Block({0}, {3}, 2), Tensor::F32({1}, {2}));  // another shape
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->status().code(), Code::kInvalidArgument);

  auto bad = pieces.Add({7, 3, 0, 1}, Block({0}, {-2}, 1), Tensor::F32({1}, {1}));
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->status().code(), Code::kInvalidArgument);
}

TEST(PieceAssemblerTest, HeadersThatWouldSizeAHugeShardAreRefusedBeforeAnythingIsSized) {
  PieceAssembler pieces;
  // A destination whose bytes wrap around in 64 bits (2^32 * 2^32 * 4).
  const int64_t big = int64_t{1} << 32;
  auto wraps = pieces.Add({7, 3, 0, 0}, Block({0, 0}, {big, big}, 1), Tensor::F32({1}, {1}));
  ASSERT_TRUE(wraps.has_value());
  EXPECT_EQ(wraps->status().code(), Code::kInvalidArgument);
  EXPECT_NE(wraps->status().message().find("[4294967296,4294967296]"), std::string::npos)
      << wraps->status().ToString();
  // More pieces than any shard has producers: refused at once, not a vector of 4 billion
  // slots, nor a shard waiting for ever for the rest.
  auto many = pieces.Add({7, 3, 0, 1}, Rows(0, 0xFFFFFFFF), Tensor::F32({1}, {1}));
  ASSERT_TRUE(many.has_value());
  EXPECT_EQ(many->status().code(), Code::kInvalidArgument);
  EXPECT_EQ(many->status().message(), "a shard made of 4294967295 pieces (at most 65536)");
  EXPECT_EQ(pieces.partial(), 0u);
}

TEST(PieceAssemblerTest, RoutedRowsAreJoinedInProducerOrder) {
  PieceAssembler pieces;
  const InputKey key{7, 3, 0, 0};
  EXPECT_FALSE(pieces.Add(key, Rows(2, 3), Tensor::F32({1, 2}, {5, 6})));
  EXPECT_FALSE(pieces.Add(key, Rows(0, 3), Tensor::F32({2, 2}, {1, 2, 3, 4})));
  auto whole = pieces.Add(key, Rows(1, 3), Tensor::F32({0, 2}, {}));  // no rows from 1
  ASSERT_TRUE(whole.has_value());
  ASSERT_TRUE(whole->ok()) << whole->status().ToString();
  EXPECT_EQ(**whole, Tensor::F32({3, 2}, {1, 2, 3, 4, 5, 6}));
}

TEST(PieceAssemblerTest, RowsFromOneProducerTwiceAreAnError) {
  PieceAssembler pieces;
  const InputKey key{7, 3, 0, 0};
  EXPECT_FALSE(pieces.Add(key, Rows(0, 2), Tensor::F32({1}, {1})));
  auto whole = pieces.Add(key, Rows(0, 2), Tensor::F32({1}, {2}));
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->status().code(), Code::kInvalidArgument);
}

// What a piece declares is not trusted with memory: a shard of 2^40 elements, or the most
// producers a shard may have, costs only the pieces that came, and the shard fails once the
// last one did.
TEST(PieceAssemblerTest, HugeDeclaredShardsAndCountsAllocateNothingAhead) {
  PieceAssembler pieces;
  const InputKey key{7, 3, 0, 0};
  EXPECT_FALSE(pieces.Add(key, Block({0}, {int64_t{1} << 40}, 2), Tensor::F32({1}, {1})));
  auto whole = pieces.Add(key, Block({1}, {int64_t{1} << 40}, 2), Tensor::F32({1}, {2}));
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->status().code(), Code::kInvalidArgument) << whole->status().ToString();

  EXPECT_FALSE(
      pieces.Add({7, 3, 0, 1}, Rows(0, PieceAssembler::kMaxPieces), Tensor::F32({1}, {1})));
  EXPECT_EQ(pieces.partial(), 1u);
}

TEST(PieceAssemblerTest, BlocksThatDoNotAddUpToTheShardFailIt) {
  PieceAssembler pieces;
  const InputKey key{7, 3, 0, 0};
  // Two elements of a three-element shard.
  EXPECT_FALSE(pieces.Add(key, Block({0}, {3}, 2), Tensor::F32({1}, {1})));
  auto whole = pieces.Add(key, Block({1}, {3}, 2), Tensor::F32({1}, {2}));
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->status().code(), Code::kInvalidArgument) << whole->status().ToString();
}

TEST(PieceAssemblerTest, RowsAndBlocksForOneShardFailIt) {
  PieceAssembler pieces;
  const InputKey key{7, 3, 0, 0};
  EXPECT_FALSE(pieces.Add(key, Rows(0, 2), Tensor::F32({1}, {1})));
  auto whole = pieces.Add(key, Block({0}, {2}, 2), Tensor::F32({1}, {2}));
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace atl::executor
