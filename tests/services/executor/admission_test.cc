// AdmissionCore without processes: compiled functions, the failures an entry can meet, the
// object-store reservations its outputs need and where its inputs come from.
#include "services/executor/admission.h"

#include <gtest/gtest.h>

#include "tests/services/executor/executor_test_util.h"
#include "tests/status_matchers.h"

namespace atl::executor {
namespace {

using testutil::MakeCompile;
using testutil::MakeEntry;
using testutil::ScaleFunction;
using testutil::StoreDest;

constexpr uint64_t kScale = 11;
const ir::TensorType kRows = ir::SplitType(DType::kF32, {4}, 0);  // f32 [4] cut in shards

class AdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_THAT(core_.Compile(MakeCompile(kScale, ScaleFunction(kRows), 2)), IsOk());
  }
  AdmissionCore core_{"host0", /*num_devices=*/2};
};

TEST_F(AdmissionTest, AnEntryThatFitsGetsItsFunctionAndLayout) {
  Admission a = core_.Admit(MakeEntry(kScale, 1, 2, /*device=*/1), "sched");
  ASSERT_THAT(a.item->failure, IsOk());
  EXPECT_TRUE(a.has_device);
  ASSERT_NE(a.item->function, nullptr);
  EXPECT_EQ(a.item->function->name, "scale");
  ASSERT_NE(a.item->layout, nullptr);
  EXPECT_EQ(a.item->layout->shard_endpoints.size(), 2u);
  EXPECT_EQ(a.item->scheduler, "sched");
  EXPECT_EQ(a.item->inputs.size(), 1u);
  EXPECT_EQ(a.item->inputs_missing, 1u);
  EXPECT_FALSE(a.item->Runnable());
}

TEST_F(AdmissionTest, AnUnknownFunctionFailsWithNotFound) {
  Admission a = core_.Admit(MakeEntry(99, 0, 2), "");
  EXPECT_EQ(a.item->failure.code(), Code::kNotFound);
  EXPECT_NE(a.item->failure.message().find("function 99 was never compiled on host host0"),
            std::string::npos)
      << a.item->failure.ToString();
  EXPECT_EQ(a.item->function, nullptr);
  EXPECT_TRUE(a.has_device);
}

TEST_F(AdmissionTest, AShardCountOtherThanCompiledFails) {
  Admission a = core_.Admit(MakeEntry(kScale, 0, 4), "");
  EXPECT_EQ(a.item->failure.code(), Code::kInvalidArgument);
  EXPECT_NE(a.item->failure.message().find("compiled for 2 shards, not 4"), std::string::npos)
      << a.item->failure.ToString();
  EXPECT_EQ(a.item->function, nullptr);
}

// A run lowered before its slice was remapped, on a function compiled here for the new
// mapping (and the other way round): refused at once, Unavailable (submitting again
// helps), not run with a layout whose partners are elsewhere.
TEST_F(AdmissionTest, AnEntryForAnotherMappingOfTheSliceFailsUnavailable) {
  proto::Compile remapped = MakeCompile(kScale, ScaleFunction(kRows), 2);
  remapped.slice_mapping = 1;
  ASSERT_THAT(core_.Compile(remapped), IsOk());
  proto::Entry old = MakeEntry(kScale, 0, 2);
  Admission a = core_.Admit(old, "");
  EXPECT_EQ(a.item->failure.code(), Code::kUnavailable);
  EXPECT_NE(a.item->failure.message().find(
                "compiled on host host0 for mapping 1 of its slice, the run was lowered for "
                "mapping 0"),
            std::string::npos)
      << a.item->failure.ToString();
  old.slice_mapping = 1;
  EXPECT_THAT(core_.Admit(old, "").item->failure, IsOk());
}

TEST_F(AdmissionTest, AnArityOtherThanTheFunctionsFails) {
  proto::Entry e = MakeEntry(kScale, 0, 2);
  e.inputs.push_back({proto::InputSource::kTuple, 0, 0});
  Admission a = core_.Admit(std::move(e), "");
  EXPECT_EQ(a.item->failure.code(), Code::kInvalidArgument);
  EXPECT_NE(a.item->failure.message().find("has 2 inputs and 1 outputs; the function has 1 and 1"),
            std::string::npos)
      << a.item->failure.ToString();
}

TEST_F(AdmissionTest, ADeviceThisHostLacksHasNoStreamAndReservesNothing) {
  proto::Entry e = MakeEntry(kScale, 0, 2, /*device=*/2);
  e.outputs = {{StoreDest(5, 0)}};
  Admission a = core_.Admit(std::move(e), "");
  EXPECT_FALSE(a.has_device);
  EXPECT_EQ(a.item->failure.code(), Code::kInvalidArgument);
  EXPECT_NE(a.item->failure.message().find("device 2 does not exist on host host0"),
            std::string::npos);
  EXPECT_TRUE(a.reservations.empty());
  EXPECT_TRUE(a.tuple_inputs.empty());
}

TEST_F(AdmissionTest, AnEntryNamingALostPeerFailsWithWhyUntilItIsBack) {
  proto::Entry e = MakeEntry(kScale, 0, 2);
  e.peers = {"tcp://a:1", "tcp://b:1"};
  core_.PeerLost("tcp://b:1", "tcp://b:2", Unavailable("heartbeat lapsed"));
  Admission lost = core_.Admit(e, "");
  EXPECT_EQ(lost.item->failure.code(), Code::kUnavailable);
  EXPECT_EQ(lost.item->failure.message(), "heartbeat lapsed");

  proto::Entry other = MakeEntry(kScale, 1, 2);
  other.peers = {"tcp://a:1"};
  EXPECT_THAT(core_.Admit(other, "").item->failure, IsOk()) << "only entries naming it fail";

  core_.PeerBack("tcp://b:1", "tcp://b:2");
  EXPECT_THAT(core_.Admit(e, "").item->failure, IsOk());
}

TEST_F(AdmissionTest, AnEntryWhoseCollectivesMeetALostHostFailsUntilItIsBack) {
  // Both functions' shard 1 runs on host b; only the all-reduce needs b while shard 0 runs.
  constexpr uint64_t kAllReduce = 13;
  constexpr uint64_t kLocal = 14;
  const std::vector<std::string> layout = {"tcp://self:1", "tcp://b:2"};
  ASSERT_THAT(core_.Compile({kAllReduce, 2, testutil::AllReduceFunction(4), layout}), IsOk());
  ASSERT_THAT(core_.Compile({kLocal, 2, ScaleFunction(kRows), layout}), IsOk());
  core_.PeerLost("tcp://b:1", "tcp://b:2", Unavailable("host b lost"));

  // No tuples come from b (no peers): its partial in the all-reduce is what is missing.
  Admission lost = core_.Admit(MakeEntry(kAllReduce, 0, 2), "");
  EXPECT_EQ(lost.item->failure.code(), Code::kUnavailable);
  EXPECT_EQ(lost.item->failure.message(), "host b lost");
  EXPECT_THAT(core_.Admit(MakeEntry(kLocal, 0, 2), "").item->failure, IsOk())
      << "a shard that meets no other shard does not need b";

  core_.PeerBack("tcp://b:1", "tcp://b:2");
  EXPECT_THAT(core_.Admit(MakeEntry(kAllReduce, 0, 2), "").item->failure, IsOk());
}

TEST_F(AdmissionTest, AnEntryTheSchedulerGaveUpOnFailsWithItsError) {
  proto::Entry e = MakeEntry(kScale, 0, 2);
  e.error_code = static_cast<int32_t>(Code::kCancelled);
  e.error = "client 3 said goodbye";
  Admission a = core_.Admit(std::move(e), "");
  EXPECT_EQ(a.item->failure.code(), Code::kCancelled);
  EXPECT_EQ(a.item->failure.message(), "client 3 said goodbye");
  EXPECT_TRUE(a.item->Runnable()) << "it waits for nothing";
}

TEST_F(AdmissionTest, AStaticStoreOutputIsReservedWithItsShardShapeOnItsDevice) {
  proto::Entry e = MakeEntry(kScale, 1, 2, /*device=*/1);
  e.outputs = {{testutil::TupleDest("tcp://x:1", 4, 0, 1), StoreDest(5, 1)}};
  Admission a = core_.Admit(std::move(e), "");
  ASSERT_EQ(a.reservations.size(), 1u);
  const OutputReservation& r = a.reservations[0];
  EXPECT_FALSE(r.deferred);
  EXPECT_EQ(r.create.object_id, 5u);
  EXPECT_EQ(r.create.shard, 1u);
  EXPECT_EQ(r.create.owner_client, 42u);
  EXPECT_EQ(r.create.dtype, DType::kF32);
  EXPECT_EQ(r.create.shape, (Shape{2}));  // [4] over 2 shards
  EXPECT_EQ(r.create.device, 1);
}

TEST_F(AdmissionTest, ADataDependentOutputIsDeferred) {
  constexpr uint64_t kFilter = 12;
  ASSERT_THAT(core_.Compile(MakeCompile(kFilter, testutil::FilterFunction(8), 1)), IsOk());
  proto::Entry e = MakeEntry(kFilter, 0, 1);
  e.outputs = {{StoreDest(6, 0)}};
  Admission a = core_.Admit(std::move(e), "");
  ASSERT_THAT(a.item->failure, IsOk());
  ASSERT_EQ(a.reservations.size(), 1u);
  EXPECT_TRUE(a.reservations[0].deferred);
  EXPECT_EQ(a.reservations[0].create.shape, (Shape{kDynamicDim}));
}

TEST_F(AdmissionTest, AFailingEntryStillReservesItsOutputsToSealThemWithTheError) {
  proto::Entry e = MakeEntry(99, 0, 2);
  e.outputs = {{StoreDest(5, 0)}};
  Admission a = core_.Admit(std::move(e), "");
  EXPECT_FALSE(a.item->failure.ok());
  ASSERT_EQ(a.reservations.size(), 1u);
  EXPECT_FALSE(a.reservations[0].deferred);
  EXPECT_EQ(a.reservations[0].create.object_id, 5u);
}

TEST_F(AdmissionTest, InputsAreSortedIntoTuplesAndStoreReads) {
  constexpr uint64_t kAdd = 13;
  ir::FunctionDef add;
  add.name = "add";
  add.inputs = {kRows, kRows, kRows};
  add.ops = {
      ir::Op{ir::OpCode::kAdd, {testutil::InputOperand(0), testutil::InputOperand(1)}, 0.0, kRows}};
  add.outputs = {testutil::OpOperand(0)};
  ASSERT_THAT(core_.Compile(MakeCompile(kAdd, add, 2)), IsOk());
  proto::Entry e = MakeEntry(kAdd, 1, 2);
  e.inputs = {{proto::InputSource::kTuple, 0, 0},
              {proto::InputSource::kStore, 9, 1},
              {proto::InputSource::kTuple, 0, 0}};
  Admission a = core_.Admit(std::move(e), "");
  ASSERT_THAT(a.item->failure, IsOk());
  EXPECT_EQ(a.tuple_inputs, (std::vector<InputKey>{{7, 3, 0, 1}, {7, 3, 2, 1}}));
  EXPECT_EQ(a.store_inputs, (std::vector<uint32_t>{1}));
  EXPECT_EQ(a.item->inputs_missing, 3u);
}

TEST_F(AdmissionTest, AnInlineArgumentFillsItsInputAtAdmission) {
  proto::Entry e = MakeEntry(kScale, 1, 2);
  const float values[] = {1.5f, 2.5f};  // shard 1 of [4]: [2]
  e.inputs = {{proto::InputSource::kInline, 0, 0, DType::kF32, {2}, {}}};
  e.inputs[0].bytes.assign(reinterpret_cast<const char*>(values),
                           reinterpret_cast<const char*>(values) + sizeof(values));
  Admission a = core_.Admit(std::move(e), "");
  ASSERT_THAT(a.item->failure, IsOk());
  EXPECT_TRUE(a.store_inputs.empty());
  EXPECT_TRUE(a.tuple_inputs.empty());
  EXPECT_EQ(a.item->inputs_missing, 0u);
  ASSERT_TRUE(a.item->inputs[0].has_value());
  EXPECT_EQ(a.item->inputs[0]->as<float>()[1], 2.5f);
}

TEST_F(AdmissionTest, AnInlineArgumentWhoseBytesDoNotFitItsShapeFailsTheShard) {
  proto::Entry e = MakeEntry(kScale, 1, 2);
  e.inputs = {{proto::InputSource::kInline, 0, 0, DType::kF32, {2}, {'x', 'y', 'z'}}};
  Admission a = core_.Admit(std::move(e), "");
  EXPECT_EQ(a.item->failure.code(), Code::kInvalidArgument);
  EXPECT_NE(a.item->failure.ToString().find("inline argument"), std::string::npos);
}

TEST_F(AdmissionTest, CompileRefusesAnInvalidFunctionOrLayout) {
  proto::Compile bad_layout = MakeCompile(20, ScaleFunction(kRows), 2);
  bad_layout.shard_endpoints.pop_back();
  Status refused = core_.Compile(bad_layout);
  EXPECT_EQ(refused.code(), Code::kInvalidArgument);
  EXPECT_NE(refused.message().find("1 shard endpoints for 2 shards"), std::string::npos);
  // [4] does not divide over 3 shards.
  EXPECT_EQ(core_.Compile(MakeCompile(21, ScaleFunction(kRows), 3)).code(), Code::kInvalidArgument);
  EXPECT_EQ(core_.Find(20), nullptr);
  EXPECT_EQ(core_.Find(21), nullptr);
  ASSERT_NE(core_.Find(kScale), nullptr);
  EXPECT_EQ(core_.Find(kScale)->num_shards, 2u);
}

TEST_F(AdmissionTest, ARunLoopChainsItsStepsOnEachShardAndEndsInTheStore) {
  proto::RunLoop loop;
  loop.run_id = 30;
  loop.function_id = kScale;
  loop.steps = 3;
  loop.shards = {0, 1};
  loop.devices = {1, 0};
  loop.result_object = 77;
  auto shards = core_.LoopEntries(loop, 1, "tcp://self:2");
  ASSERT_THAT(shards, IsOk());
  ASSERT_EQ(shards->size(), 2u);
  const LoopShard& second = (*shards)[1];
  EXPECT_EQ(second.first_input, (InputKey{30, 0, 0, 1}));
  ASSERT_EQ(second.steps.size(), 3u);
  for (uint32_t step = 0; step < 3; ++step) {
    const proto::Entry& e = second.steps[step];
    EXPECT_EQ(e.node, step);
    EXPECT_EQ(e.gang_seq, step + 1);
    EXPECT_EQ(e.device, 0u);
    EXPECT_EQ(e.num_shards, 2u);
    ASSERT_EQ(e.outputs.size(), 1u);
    ASSERT_EQ(e.outputs[0].size(), 1u);
  }
  const proto::OutputDest& next = second.steps[0].outputs[0][0];
  EXPECT_EQ(next.kind, proto::OutputDest::kTuple);
  EXPECT_EQ(next.data_endpoint, "tcp://self:2");
  EXPECT_EQ(next.node, 1u);
  EXPECT_EQ(next.shard, 1u);
  const proto::OutputDest& last = second.steps[2].outputs[0][0];
  EXPECT_EQ(last.kind, proto::OutputDest::kStore);
  EXPECT_EQ(last.object_id, 77u);
  EXPECT_EQ(last.shard, 1u);
  // Each step admits cleanly.
  EXPECT_THAT(core_.Admit(second.steps[2], "").item->failure, IsOk());
}

TEST_F(AdmissionTest, AMalformedRunLoopOrUnknownFunctionIsRefused) {
  proto::RunLoop loop;
  loop.function_id = kScale;
  loop.steps = 1;
  loop.shards = {0};
  loop.devices = {0};
  EXPECT_EQ(core_.LoopEntries(loop, 0, "e").status().code(), Code::kInvalidArgument);
  loop.devices = {};
  EXPECT_EQ(core_.LoopEntries(loop, 1, "e").status().code(), Code::kInvalidArgument);
  loop.devices = {0};
  loop.steps = 0;
  EXPECT_EQ(core_.LoopEntries(loop, 1, "e").status().code(), Code::kInvalidArgument);
  loop.steps = 1;
  loop.function_id = 99;
  EXPECT_EQ(core_.LoopEntries(loop, 1, "e").status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace atl::executor
