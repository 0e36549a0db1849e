// Lowering: a traced program becomes per-shard entries on the slices' devices, object-store
// puts for its arguments, tuple transfers for its edges (whole shards between like layouts,
// resharding pieces between different shardings or device sets), and result plans; bad
// arguments and edges give InvalidArgument naming what is wrong.
#include "client/lowering.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/client/registered_function.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

using ::testing::HasSubstr;
using Dest = proto::OutputDest;
using Source = proto::InputSource;

// The destination of a whole shard pushed to input `input` of shard `shard` of `node`.
Dest TupleTo(const std::string& host, uint32_t node, uint32_t input, uint32_t shard,
             proto::Piece piece = {}) {
  return {Dest::kTuple, "tcp://" + host + ":data", node, input, shard, 0, std::move(piece)};
}

// A value carried by the entry itself.
Source Inline(const Tensor& value) {
  const auto* bytes = reinterpret_cast<const char*>(value.data());
  return {Source::kInline, 0, 0, value.dtype(), value.shape(), {bytes, bytes + value.nbytes()}};
}

class LoweringTest : public ::testing::Test {
 protected:
  // Lowers `program` as client 7's run 9 with weight 2, object ids counting from 100.
  Result<LoweredRun> LowerProgram(const Result<Program>& program,
                                  const std::vector<LoweringArg>& args,
                                  SubmitOptions options = {}) {
    EXPECT_THAT(program, IsOk());
    if (!program.ok()) return program.status();
    return Lower(*HandleAccess::ImplOf(*program), args, 7, 9, options, 2.0,
                 [this] { return next_object_++; });
  }
  // The entries run for node `node`, by shard, from the submit to `scheduler`.
  static std::vector<proto::PlacedEntry> NodeEntries(const LoweredRun& run,
                                                     const std::string& scheduler, uint32_t node) {
    std::vector<proto::PlacedEntry> out;
    for (const auto& placed : run.per_scheduler.at(scheduler).entries) {
      if (placed.entry.node == node) out.push_back(placed);
    }
    return out;
  }

  uint64_t next_object_ = 100;
  const ir::TensorType split_ = ir::SplitType(DType::kF32, {4}, 0);
  const ir::TensorType replicated_ = ir::SplitType(DType::kF32, {4}, -1);
  // A device each of h0 and h1 (h0's device 1, h1's device 0), under scheduler "tcp://s1".
  const proto::SliceInfo pair_ = test::SliceOn(1, "tcp://s1", {{"h0", 1}, {"h1", 0}});
  const Tensor value_ = Tensor::F32({4}, {1, 2, 3, 4});
};

TEST_F(LoweringTest, ThePaperFigureTwoProgram) {
  const Function a = test::Registered(11, test::PassThrough("a", {split_}), pair_);
  const Function b = test::Registered(12, test::PassThrough("b", {split_}), pair_);
  const Function c = test::Registered(13, test::PassThrough("c", {split_}), pair_);
  ProgramBuilder p;
  Traced v = p.Arg(DType::kF32, {4});
  Traced x = p.Call(a, {v})[0];
  Traced y = p.Call(b, {v})[0];
  Traced z = p.Call(a, {p.Call(c, {x})[0]})[0];
  p.Return({y, z});
  auto run = LowerProgram(p.Build(), {{&value_, nullptr}});
  ASSERT_THAT(run, IsOk());

  // One island: one submit, every node's shards in node order.
  ASSERT_EQ(run->per_scheduler.size(), 1u);
  const proto::SubmitProgram& submit = run->per_scheduler.at("tcp://s1");
  EXPECT_EQ(submit.client_id, 7u);
  EXPECT_EQ(submit.run_id, 9u);
  EXPECT_EQ(submit.weight, 2.0);
  ASSERT_EQ(submit.entries.size(), 8u);
  const std::vector<uint64_t> functions = {11, 12, 13, 11};
  for (uint32_t k = 0; k < 4; ++k) {
    for (uint32_t s = 0; s < 2; ++s) {
      const auto& placed = submit.entries[2 * k + s];
      EXPECT_EQ(placed.executor, s == 0 ? "tcp://h0:control" : "tcp://h1:control");
      const proto::Entry& e = placed.entry;
      EXPECT_EQ(e.run_id, 9u);
      EXPECT_EQ(e.node, k);
      EXPECT_EQ(e.function_id, functions[k]);
      EXPECT_EQ(e.device, 1 - s) << "the device's index on its host";
      EXPECT_EQ(e.shard, s);
      EXPECT_EQ(e.num_shards, 2u);
      EXPECT_EQ(e.owner_client, 7u);
      EXPECT_FALSE(e.sequential);
    }
  }

  // The argument is small: it travels inside the entry of each call taking it, cut like
  // that call's input; nothing is put.
  EXPECT_TRUE(run->puts.empty());
  for (uint32_t s = 0; s < 2; ++s) {
    const auto& n0 = submit.entries[s].entry;
    const auto& n1 = submit.entries[2 + s].entry;
    const auto& n2 = submit.entries[4 + s].entry;
    const auto& n3 = submit.entries[6 + s].entry;
    const Source half = Inline(s == 0 ? Tensor::F32({2}, {1, 2}) : Tensor::F32({2}, {3, 4}));
    EXPECT_EQ(n0.inputs, (std::vector<Source>{half}));
    EXPECT_EQ(n1.inputs, (std::vector<Source>{half}));
    // x and c's output move shard to shard, whole: the layouts are the same.
    EXPECT_EQ(n2.inputs, (std::vector<Source>{{Source::kTuple, 0, 0}}));
    EXPECT_EQ(n0.outputs[0], (std::vector<Dest>{TupleTo(s == 0 ? "h0" : "h1", 2, 0, s)}));
    EXPECT_EQ(n2.outputs[0], (std::vector<Dest>{TupleTo(s == 0 ? "h0" : "h1", 3, 0, s)}));
    // The results y and z land in each shard's own store.
    EXPECT_EQ(n1.outputs[0], (std::vector<Dest>{{Dest::kStore, "", 0, 0, s, 100, {}}}));
    EXPECT_EQ(n3.outputs[0], (std::vector<Dest>{{Dest::kStore, "", 0, 0, s, 101, {}}}));
  }
  ASSERT_EQ(run->results.size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    const ResultPlan& plan = run->results[r];
    EXPECT_EQ(plan.type, split_);
    EXPECT_EQ(plan.mesh, Shape{2});
    EXPECT_EQ(plan.arg_index, -1);
    EXPECT_EQ(plan.borrowed_arg, -1);
    ASSERT_EQ(plan.shards.size(), 2u);
    EXPECT_EQ(plan.shards[1].store, "tcp://h1:store");
    EXPECT_EQ(plan.shards[1].object_id, 100 + r);
    EXPECT_EQ(plan.shards[1].shard, 1u);
  }
}

TEST_F(LoweringTest, AnArgumentOverTheInlineBoundIsPutNextToEachShardThatReadsIt) {
  const int64_t n = 2 * (kInlineArgumentBytes / sizeof(float) + 1);  // a shard just over
  const ir::TensorType big = ir::SplitType(DType::kF32, {n}, 0);
  const Function a = test::Registered(11, test::PassThrough("a", {big}), pair_);
  ProgramBuilder p;
  p.Return({p.Call(a, {p.Arg(DType::kF32, {n})})[0]});
  const Tensor value(DType::kF32, {n});
  auto run = LowerProgram(p.Build(), {{&value, nullptr}});
  ASSERT_THAT(run, IsOk());
  ASSERT_EQ(run->puts.size(), 2u);
  for (uint32_t s = 0; s < 2; ++s) {
    EXPECT_EQ(run->puts[s].object_id, 100u);
    EXPECT_EQ(run->puts[s].shard, s);
    EXPECT_EQ(run->puts[s].store, s == 0 ? "tcp://h0:store" : "tcp://h1:store");
    EXPECT_EQ(run->puts[s].value.shape(), (Shape{n / 2}));
    EXPECT_EQ(run->per_scheduler.at("tcp://s1").entries[s].entry.inputs,
              (std::vector<Source>{{Source::kStore, 100, s}}));
  }
}

TEST_F(LoweringTest, AnEdgeToAnotherIslandGoesToItsDevices) {
  const proto::SliceInfo other = test::SliceOn(2, "tcp://s2", {{"h2"}, {"h3"}});
  const Function a = test::Registered(11, test::PassThrough("a", {split_}), pair_);
  const Function b = test::Registered(12, test::PassThrough("b", {split_}), other);
  ProgramBuilder p;
  p.Return({p.Call(b, {p.Call(a, {p.Arg(DType::kF32, {4})})[0]})[0]});
  auto run = LowerProgram(p.Build(), {{&value_, nullptr}});
  ASSERT_THAT(run, IsOk());
  ASSERT_EQ(run->per_scheduler.size(), 2u);
  const auto producers = NodeEntries(*run, "tcp://s1", 0);
  const auto consumers = NodeEntries(*run, "tcp://s2", 1);
  ASSERT_EQ(producers.size(), 2u);
  ASSERT_EQ(consumers.size(), 2u);
  EXPECT_TRUE(NodeEntries(*run, "tcp://s1", 1).empty());
  EXPECT_EQ(consumers[1].executor, "tcp://h3:control");
  for (uint32_t s = 0; s < 2; ++s) {
    EXPECT_EQ(producers[s].entry.outputs[0],
              (std::vector<Dest>{TupleTo(s == 0 ? "h2" : "h3", 1, 0, s)}));
  }
  EXPECT_EQ(run->results[0].shards[0].store, "tcp://h2:store");
}

TEST_F(LoweringTest, AnotherShardingGetsResharded) {
  const Function a = test::Registered(11, test::PassThrough("a", {split_}), pair_);
  const Function b = test::Registered(12, test::PassThrough("b", {replicated_}), pair_);
  ProgramBuilder p;
  p.Return({p.Call(b, {p.Call(a, {p.Arg(DType::kF32, {4})})[0]})[0]});
  auto run = LowerProgram(p.Build(), {{&value_, nullptr}});
  ASSERT_THAT(run, IsOk());
  const auto producers = NodeEntries(*run, "tcp://s1", 0);
  // Each replica of b's input gets both halves, one piece from each of a's shards.
  for (uint32_t from = 0; from < 2; ++from) {
    const auto& dests = producers[from].entry.outputs[0];
    ASSERT_EQ(dests.size(), 2u) << "shard " << from;
    for (uint32_t to = 0; to < 2; ++to) {
      const proto::Piece piece{{0}, {2}, {2 * from}, {4}, 2};
      EXPECT_EQ(dests[to], TupleTo(to == 0 ? "h0" : "h1", 1, 0, to, piece));
    }
  }
  EXPECT_EQ(run->results[0].mesh, Shape{2});
  EXPECT_EQ(run->results[0].type, replicated_);
}

TEST_F(LoweringTest, MoreDevicesGetResharded) {
  const proto::SliceInfo four =
      test::SliceOn(2, "tcp://s1", {{"h0"}, {"h0", 1}, {"h1"}, {"h1", 1}});
  const Function a = test::Registered(11, test::PassThrough("a", {split_}), pair_);
  const Function b = test::Registered(12, test::PassThrough("b", {split_}), four);
  ProgramBuilder p;
  p.Return({p.Call(b, {p.Call(a, {p.Arg(DType::kF32, {4})})[0]})[0]});
  auto run = LowerProgram(p.Build(), {{&value_, nullptr}});
  ASSERT_THAT(run, IsOk());
  const auto producers = NodeEntries(*run, "tcp://s1", 0);
  ASSERT_EQ(NodeEntries(*run, "tcp://s1", 1).size(), 4u);
  // a's shard s (2 elements) feeds b's shards 2s and 2s+1 (1 element each), one piece each.
  for (uint32_t from = 0; from < 2; ++from) {
    const auto& dests = producers[from].entry.outputs[0];
    ASSERT_EQ(dests.size(), 2u);
    for (uint32_t i = 0; i < 2; ++i) {
      const uint32_t to = 2 * from + i;
      EXPECT_EQ(dests[i], TupleTo(from == 0 ? "h0" : "h1", 1, 0, to, {{i}, {1}, {0}, {1}, 1}));
    }
  }
}

TEST_F(LoweringTest, AnEdgeThatCannotBeReshardedNamesTheCalls) {
  ir::FunctionDef filter = test::PassThrough("filter", {split_});
  const ir::TensorType dynamic{DType::kF32, {kDynamicDim}, {0}};
  filter.ops.push_back({ir::OpCode::kFilter, {{ir::Operand::kInput, 0}}, 0.5, dynamic});
  filter.outputs = {{ir::Operand::kOp, 0}};
  const Function f = test::Registered(11, filter, pair_);
  const Function g = test::Registered(
      12, test::PassThrough("g", {ir::TensorType{DType::kF32, {kDynamicDim}, {-1}}}), pair_);
  ProgramBuilder p;
  p.Return({p.Call(g, {p.Call(f, {p.Arg(DType::kF32, {4})})[0]})[0]});
  auto run = LowerProgram(p.Build(), {{&value_, nullptr}});
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(run.status().message(), HasSubstr("'filter' output 0 feeding 'g' input 0"));
  EXPECT_THAT(run.status().message(), HasSubstr("dynamic shape"));
}

// Routed rows: every producer shard sends every consumer shard its rows (possibly none),
// picked by the destinations output, so that each consumer shard hears from all producers.
TEST_F(LoweringTest, RoutedRowsGoFromEveryProducerShardToEveryConsumerShard) {
  const Function gate = test::Registered(
      11,
      test::PassThrough(
          "gate", {ir::SplitType(DType::kF32, {4, 2}, 0), ir::SplitType(DType::kI32, {4}, 0)}),
      pair_);
  const proto::SliceInfo three = test::SliceOn(2, "tcp://s1", {{"h2"}, {"h3"}, {"h4"}});
  auto expert = [&](const ir::TensorType& rows) {
    return test::Registered(12, test::PassThrough("expert", {rows}), three);
  };
  const Tensor rows = Tensor::F32({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  const Tensor destinations = Tensor::I32({4}, {2, 0, 2, 1});
  auto trace = [&](const Function& consumer) {
    ProgramBuilder p;
    auto outs = p.Call(gate, {p.Arg(DType::kF32, {4, 2}), p.Arg(DType::kI32, {4})});
    p.Return({p.Call(consumer, {p.Route(outs[0], outs[1])})[0]});
    return p.Build();
  };
  auto run = LowerProgram(trace(expert({DType::kF32, {kDynamicDim, 2}, {0, -1}})),
                          {{&rows, nullptr}, {&destinations, nullptr}});
  ASSERT_THAT(run, IsOk());
  const auto producers = NodeEntries(*run, "tcp://s1", 0);
  ASSERT_EQ(producers.size(), 2u);
  for (const auto& producer : producers) {
    const auto& dests = producer.entry.outputs[0];
    ASSERT_EQ(dests.size(), 3u);
    for (uint32_t c = 0; c < 3; ++c) {
      Dest want = TupleTo("h" + std::to_string(2 + c), 1, 0, c);
      want.piece.of = 2;  // from both producer shards
      want.route_by = 1;  // gate's output 1 says where each row goes
      want.route_shards = 3;
      EXPECT_EQ(dests[c], want);
    }
    EXPECT_TRUE(producer.entry.outputs[1].empty()) << "the destinations go nowhere themselves";
  }
  for (const auto& consumer : NodeEntries(*run, "tcp://s1", 1)) {
    EXPECT_EQ(consumer.entry.inputs, (std::vector<Source>{{Source::kTuple, 0, 0}}));
  }

  auto replicated = LowerProgram(trace(expert({DType::kF32, {kDynamicDim, 2}, {-1, -1}})),
                                 {{&rows, nullptr}, {&destinations, nullptr}});
  ASSERT_FALSE(replicated.ok());
  EXPECT_EQ(replicated.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(replicated.status().message(),
            "'expert' input 0 takes routed rows: it must be split along dimension 0 over a 1-D "
            "slice");
}

TEST_F(LoweringTest, IrregularAndSequentialNodesAreMarkedSequential) {
  ir::FunctionDef filter = test::PassThrough("filter", {split_});
  filter.ops.push_back({ir::OpCode::kFilter,
                        {{ir::Operand::kInput, 0}},
                        0.5,
                        ir::TensorType{DType::kF32, {kDynamicDim}, {0}}});
  filter.outputs = {{ir::Operand::kOp, 0}};
  const Function f = test::Registered(11, filter, pair_);
  const Function a = test::Registered(12, test::PassThrough("a", {split_}), pair_);
  ProgramBuilder p;
  Traced v = p.Arg(DType::kF32, {4});
  p.Return({p.Call(f, {v})[0], p.Call(a, {v})[0]});
  auto run = LowerProgram(p.Build(), {{&value_, nullptr}});
  ASSERT_THAT(run, IsOk());
  EXPECT_TRUE(NodeEntries(*run, "tcp://s1", 0)[1].entry.sequential);
  EXPECT_FALSE(NodeEntries(*run, "tcp://s1", 1)[1].entry.sequential);
  run = LowerProgram(p.Build(), {{&value_, nullptr}}, SubmitOptions{true});
  ASSERT_THAT(run, IsOk());
  EXPECT_TRUE(NodeEntries(*run, "tcp://s1", 1)[1].entry.sequential);
}

TEST_F(LoweringTest, BadArgumentsAreRefused) {
  const Function a = test::Registered(11, test::PassThrough("a", {split_}), pair_);
  ProgramBuilder p;
  p.Return({p.Call(a, {p.Arg(DType::kF32, {4})})[0]});
  auto none = LowerProgram(p.Build(), {});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(none.status().message(), "the program takes 1 arguments, got 0");
  const Tensor wrong = Tensor::F32({5}, {1, 2, 3, 4, 5});
  auto shape = LowerProgram(p.Build(), {{&wrong, nullptr}});
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.status().message(), "argument 0 is f32[5], the program takes f32[4]");
}

TEST_F(LoweringTest, ArgumentsReturnedAsTheyAreAreNotPut) {
  ProgramBuilder p;
  Traced v = p.Arg(DType::kF32, {4});
  p.Return({v});
  auto run = LowerProgram(p.Build(), {{&value_, nullptr}});
  ASSERT_THAT(run, IsOk());
  EXPECT_TRUE(run->puts.empty());
  EXPECT_TRUE(run->per_scheduler.empty());
  ASSERT_EQ(run->results.size(), 1u);
  EXPECT_EQ(run->results[0].arg_index, 0);
  EXPECT_TRUE(run->results[0].shards.empty());
}

TEST_F(LoweringTest, AFutureFeedsFromWhereItIs) {
  const Function a = test::Registered(11, test::PassThrough("a", {split_}), pair_);
  ProgramBuilder p;
  Traced v = p.Arg(DType::kF32, {4});
  p.Return({p.Call(a, {v})[0], v});
  ResultPlan earlier{split_, {2}, {{"tcp://h0:store", 55, 0}, {"tcp://h1:store", 55, 1}}};
  auto run = LowerProgram(p.Build(), {{nullptr, &earlier}});
  ASSERT_THAT(run, IsOk());
  EXPECT_TRUE(run->puts.empty());
  const auto entries = NodeEntries(*run, "tcp://s1", 0);
  EXPECT_EQ(entries[1].entry.inputs, (std::vector<Source>{{Source::kStore, 55, 1}}));
  // Returned as is, the future's shards stay the earlier run's.
  EXPECT_EQ(run->results[1].borrowed_arg, 0);
  EXPECT_EQ(run->results[1].shards[0].object_id, 55u);

  ResultPlan elsewhere = earlier;
  elsewhere.shards[1].store = "tcp://h9:store";
  auto moved = LowerProgram(p.Build(), {{nullptr, &elsewhere}});
  ASSERT_FALSE(moved.ok());
  EXPECT_EQ(moved.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(moved.status().message(), HasSubstr("than 'a' shard 1 runs on"));
  ResultPlan replicated = earlier;
  replicated.type = replicated_;
  auto relaid = LowerProgram(p.Build(), {{nullptr, &replicated}});
  ASSERT_FALSE(relaid.ok());
  EXPECT_THAT(relaid.status().message(), HasSubstr("cannot feed 'a' input 0"));
}

TEST_F(LoweringTest, ARunOwnsEachObjectOncePerStoreWithItsShardCount) {
  // Two devices of h0 and one of h1: object shards 0 and 1 share h0's store.
  const proto::SliceInfo three = test::SliceOn(2, "tcp://s1", {{"h0", 0}, {"h0", 1}, {"h1", 0}});
  // Shards over the inline bound, so that they are put.
  const int64_t n = 3 * (kInlineArgumentBytes / sizeof(float) + 1);
  const ir::TensorType split3 = ir::SplitType(DType::kF32, {n}, 0);
  const Function a = test::Registered(11, test::PassThrough("a", {split3}), three);
  ProgramBuilder p;
  Traced v = p.Arg(DType::kF32, {n});
  p.Return({p.Call(a, {v})[0]});
  const Tensor six(DType::kF32, {n});
  auto run = LowerProgram(p.Build(), {{&six, nullptr}});
  ASSERT_THAT(run, IsOk());
  ASSERT_EQ(run->puts.size(), 3u);
  const uint64_t put = run->puts[0].object_id;
  const uint64_t result = run->results[0].shards[0].object_id;
  // Releasing per shard would release h0's objects twice.
  EXPECT_EQ(OwnedObjects(*run), (std::vector<OwnedObject>{{"tcp://h0:store", put, 2},
                                                          {"tcp://h0:store", result, 2},
                                                          {"tcp://h1:store", put, 1},
                                                          {"tcp://h1:store", result, 1}}));
  EXPECT_FALSE(run->per_scheduler.at("tcp://s1").notify_done) << "it reads no future";
}

TEST_F(LoweringTest, ARunReadingAFutureAsksForRunDoneAndOwnsNotWhatItReturnsAsIs) {
  const Function a = test::Registered(11, test::PassThrough("a", {split_}), pair_);
  ProgramBuilder p;
  Traced v = p.Arg(DType::kF32, {4});
  p.Return({p.Call(a, {v})[0], v});
  ResultPlan earlier{split_, {2}, {{"tcp://h0:store", 55, 0}, {"tcp://h1:store", 55, 1}}};
  auto run = LowerProgram(p.Build(), {{nullptr, &earlier}});
  ASSERT_THAT(run, IsOk());
  EXPECT_TRUE(run->per_scheduler.at("tcp://s1").notify_done);
  const uint64_t result = run->results[0].shards[0].object_id;
  EXPECT_EQ(OwnedObjects(*run), (std::vector<OwnedObject>{{"tcp://h0:store", result, 1},
                                                          {"tcp://h1:store", result, 1}}));
}

}  // namespace
}  // namespace atl
