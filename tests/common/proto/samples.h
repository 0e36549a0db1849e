// One sample value of every message struct in common/protocol.h and of every struct nested
// in them, each with every field set to a non-default value (protocol_roundtrip_test checks
// that), so that an encode/decode round trip that drops, swaps or truncates a field shows.
#pragma once

#include <cstdint>

#include "common/ir/ir.h"
#include "common/proto/protocol.h"

namespace atl::proto::samples {

template <typename T>
T Sample();

// ---------------------------------------------------------------------------------------
// The IR.

template <>
inline ir::TensorType Sample<ir::TensorType>() {
  return {DType::kI32, {8, 6}, {0, -1}};
}

template <>
inline ir::Operand Sample<ir::Operand>() {
  return {ir::Operand::kScalar, 3, 1.5};
}

template <>
inline ir::Op Sample<ir::Op>() {
  // A broadcast along mesh axis 1 from its member 2.
  return {ir::OpCode::kBroadcast,
          {{ir::Operand::kOp, 0, 0.0}},
          1.0,
          ir::TensorType{DType::kF32, {8, 3}, {0, -1}},
          {2}};
}

// A valid function over 4 shards: y = spin((x @ w) * 0.5, 12.5 us), its blocks swapped in
// pairs (a collective with params), outputs y and x, and one body.
template <>
inline ir::FunctionDef Sample<ir::FunctionDef>() {
  const ir::TensorType x{DType::kF32, {8, 5}, {0, -1}};
  const ir::TensorType w{DType::kF32, {5, 3}, {-1, -1}};
  const ir::TensorType y{DType::kF32, {8, 3}, {0, -1}};
  ir::FunctionDef fn;
  fn.name = "dense";
  fn.inputs = {x, w};
  fn.ops = {
      {ir::OpCode::kMatmul, {{ir::Operand::kInput, 0, 0.0}, {ir::Operand::kInput, 1, 0.0}}, 0.0, y},
      {ir::OpCode::kMul, {{ir::Operand::kOp, 0, 0.0}, {ir::Operand::kScalar, 0, 0.5}}, 0.0, y},
      {ir::OpCode::kSpin, {{ir::Operand::kOp, 1, 0.0}}, 12.5, y},
      {ir::OpCode::kCollectivePermute,
       {{ir::Operand::kOp, 2, 0.0}},
       0.0,
       y,
       {0, 1, 1, 0, 2, 3, 3, 2}},
  };
  fn.outputs = {{ir::Operand::kOp, 3, 0.0}, {ir::Operand::kInput, 0, 0.0}};
  fn.mesh = {4};
  ir::FunctionDef body;  // a body a while or scan would run: here it passes its input on
  body.name = "pass";
  body.inputs = {y};
  body.outputs = {{ir::Operand::kInput, 0, 0.0}};
  fn.bodies = {body};
  return fn;
}

// ---------------------------------------------------------------------------------------
// Generic replies.

template <>
inline Ok Sample<Ok>() {
  return {};
}

template <>
inline Error Sample<Error>() {
  return {static_cast<int32_t>(Code::kDeadlineExceeded), "waited 5000 ms for slice 9"};
}

// ---------------------------------------------------------------------------------------
// Resource manager.

template <>
inline DeviceDesc Sample<DeviceDesc>() {
  return {"cpu", uint64_t{8} << 30};
}

template <>
inline RegisterExecutor Sample<RegisterExecutor>() {
  return {"host-1",
          "island-a",
          "tcp://10.0.0.1:5000",
          "tcp://10.0.0.1:5001",
          "ipc:///tmp/atoll-store-1",
          {Sample<DeviceDesc>(), DeviceDesc{"cpu", 1 << 20}}};
}

template <>
inline RegisterExecutorReply Sample<RegisterExecutorReply>() {
  return {{4, 5, 4294967295u}, 250, {7, 1ull << 40}};
}

template <>
inline Heartbeat Sample<Heartbeat>() {
  return {Heartbeat::kStore, "host-1", 0x5eed, 2500};
}

template <>
inline RegisterScheduler Sample<RegisterScheduler>() {
  return {"island-a", "tcp://10.0.0.2:6000"};
}

template <>
inline HelloClient Sample<HelloClient>() {
  return {"notebook \xce\xbb"};  // UTF-8 survives
}

template <>
inline HelloClientReply Sample<HelloClientReply>() {
  return {uint64_t{1} << 40, 500};
}

template <>
inline Goodbye Sample<Goodbye>() {
  return {42};
}

template <>
inline HostChanged Sample<HostChanged>() {
  return {"host-2", "tcp://10.0.0.3:5000", {2, 3},
          false,    "missed 4 heartbeats", "tcp://10.0.0.3:5001"};
}

template <>
inline CreateSlice Sample<CreateSlice>() {
  return {42, 4, "island-a", "cpu"};
}

template <>
inline DeviceInfo Sample<DeviceInfo>() {
  return {7, "host-2", 3, "tcp://10.0.0.3:5000", "tcp://10.0.0.3:5001", "ipc:///tmp/store-2"};
}

template <>
inline SliceInfo Sample<SliceInfo>() {
  DeviceInfo second = Sample<DeviceInfo>();
  second.device_id = 8;
  second.local_index = 0;
  return {9, "island-a", "tcp://10.0.0.2:6000", {Sample<DeviceInfo>(), second}, 3};
}

template <>
inline SliceRemapped Sample<SliceRemapped>() {
  return {Sample<SliceInfo>(), "host host-1 (device 1) lost"};
}

template <>
inline LookupOwners Sample<LookupOwners>() {
  return {{3, 4}, {17}};
}
template <>
inline Owners Sample<Owners>() {
  return {{"client:alice", ""}, {true, false}, {"", "goodbye"}, {3}, 5};
}
template <>
inline OwnersKnown Sample<OwnersKnown>() {
  return {{3, 4}, {"client:alice", ""}, {17}, {3}, {2}, {"goodbye"}, true, {3, 4}};
}
template <>
inline DrainHost Sample<DrainHost>() {
  return {"host-2"};
}
template <>
inline DrainHostReply Sample<DrainHostReply>() {
  return {{3, 4}, {9}};
}
template <>
inline ServiceChanged Sample<ServiceChanged>() {
  return {Heartbeat::kStore, "host-1", "tcp://10.0.0.1:5001", false, "it came back", 0x5eed};
}

template <>
inline RegisterFunction Sample<RegisterFunction>() {
  return {42, 9, Sample<ir::FunctionDef>()};
}

template <>
inline RegisterFunctionReply Sample<RegisterFunctionReply>() {
  return {77};
}

template <>
inline GetClusterStatus Sample<GetClusterStatus>() {
  return {};
}

template <>
inline DeviceStatus Sample<DeviceStatus>() {
  return {7, "cpu", uint64_t{1} << 33, 2};
}

template <>
inline HostStatus Sample<HostStatus>() {
  return {
      "host-1", true, "tcp://10.0.0.1:5000", "ipc:///tmp/store-1", {Sample<DeviceStatus>()}, true,
      1200,     3400};
}

template <>
inline IslandStatus Sample<IslandStatus>() {
  return {"island-a", "tcp://10.0.0.2:6000", {Sample<HostStatus>(), HostStatus{}}, true, 5600};
}

template <>
inline SliceStatus Sample<SliceStatus>() {
  return {9, 42, "island-a", {7, 8}};
}

template <>
inline ClusterStatus Sample<ClusterStatus>() {
  return {{Sample<IslandStatus>()}, {Sample<SliceStatus>()}, 3,   2,
          "tcp://10.0.0.9:5551",    "tcp://10.0.0.9:5552",   7800};
}

// ---------------------------------------------------------------------------------------
// Executor.

template <>
inline Compile Sample<Compile>() {
  return {
      77,
      4,
      Sample<ir::FunctionDef>(),
      {"tcp://10.0.0.3:5001", "tcp://10.0.0.3:5001", "tcp://10.0.0.4:5001", "tcp://10.0.0.5:5001"},
      3};
}

template <>
inline InputSource Sample<InputSource>() {
  return {InputSource::kInline, 0xFFFFFFFFFFFFFFF0ull, 2, DType::kI32, {1}, {'a', 'b', 'c', 'd'}};
}

template <>
inline Piece Sample<Piece>() {
  return {{0, 2}, {4, 2}, {0, 0}, {4, 4}, 2};
}

template <>
inline OutputDest Sample<OutputDest>() {
  return {OutputDest::kStore, "tcp://10.0.0.3:5001", 3, 1, 2, 999, Sample<Piece>(), 1, 4};
}

template <>
inline Entry Sample<Entry>() {
  OutputDest tuple;
  tuple.data_endpoint = "tcp://10.0.0.4:5001";
  tuple.node = 4;
  return {0xFFFFFFFFFFFFFFF1ull,
          2,
          100,
          77,
          1,
          2,
          4,
          42,
          true,
          {Sample<InputSource>(), InputSource{}},
          {{Sample<OutputDest>(), tuple}, {}},
          {"tcp://10.0.0.5:5000"},
          5,
          "the scheduler gave up",
          3};
}

template <>
inline Dispatch Sample<Dispatch>() {
  Entry second = Sample<Entry>();
  second.gang_seq = 101;
  return {{Sample<Entry>(), second}};
}

template <>
inline TupleHeader Sample<TupleHeader>() {
  return {TupleHeader::kCollective,
          5,
          2,
          1,
          3,
          DType::kI32,
          {2, 3},
          static_cast<int32_t>(Code::kCancelled),
          "producer failed",
          {0, 4},
          {2, 8},
          3,
          2,
          true};
}

template <>
inline RunLoop Sample<RunLoop>() {
  return {9, 77, 128, 42, {0, 3}, {1, 0}, 0xABCDEFull, DType::kI32, {1}};
}

template <>
inline TupleBatch Sample<TupleBatch>() {
  TupleHeader ok;
  ok.shape = {4};
  return {{Sample<TupleHeader>(), ok}};
}

// ---------------------------------------------------------------------------------------
// Scheduler.

template <>
inline GangDone Sample<GangDone>() {
  return {91, 3, 330, static_cast<int32_t>(Code::kInvalidArgument), "bad shape"};
}

template <>
inline PlacedEntry Sample<PlacedEntry>() {
  return {"tcp://10.0.0.3:5000", Sample<Entry>()};
}

template <>
inline CrossIslandNode Sample<CrossIslandNode>() {
  return {2, {0, 1}, {"tcp://10.0.0.9:6000"}};
}

template <>
inline SubmitProgram Sample<SubmitProgram>() {
  return {42, 5, {Sample<PlacedEntry>(), PlacedEntry{}}, 2.5, {Sample<CrossIslandNode>()}, true};
}

template <>
inline CancelRun Sample<CancelRun>() {
  return {42, 5, "host h1 was lost"};
}

template <>
inline RunDone Sample<RunDone>() {
  return {5};
}

template <>
inline RunFailed Sample<RunFailed>() {
  return {5, static_cast<int32_t>(Code::kUnavailable), "the object store of host h1 was lost"};
}

template <>
inline NodeReleased Sample<NodeReleased>() {
  return {17, 3};
}

template <>
inline SubmitReply Sample<SubmitReply>() {
  return {3};
}

// ---------------------------------------------------------------------------------------
// Object store.

template <>
inline StoreHello Sample<StoreHello>() {
  return {};
}

template <>
inline StoreHelloReply Sample<StoreHelloReply>() {
  return {"/atoll-arena-1", uint64_t{1} << 28, uint64_t{3} << 28, 0x5eed};
}

template <>
inline CreateObject Sample<CreateObject>() {
  return {555, 1, 42, DType::kI32, {4, 4}, 1};
}

template <>
inline CreateObjectReply Sample<CreateObjectReply>() {
  return {4096, 64, 0x5eed};
}

template <>
inline SealObject Sample<SealObject>() {
  return {555, 1, static_cast<int32_t>(Code::kOutOfMemory), "arena full"};
}

template <>
inline PutObject Sample<PutObject>() {
  return {556, 2, 43, DType::kI32, {8}, 1};
}

template <>
inline GetObject Sample<GetObject>() {
  return {555, 3, 1000, false, true};
}

template <>
inline GetObjectReply Sample<GetObjectReply>() {
  return {DType::kI32, {2, 2}, 128, 16, 0x5eed, 9, 12};
}

template <>
inline UnpinObjects Sample<UnpinObjects>() {
  return {0x5eed, {9, 10}};
}

template <>
inline ReleaseObject Sample<ReleaseObject>() {
  return {555, 7, 2};
}

template <>
inline GetStoreStats Sample<GetStoreStats>() {
  return {};
}

template <>
inline StoreStats Sample<StoreStats>() {
  return {3, 1024, uint64_t{1} << 28, {{42, 2}, {43, 1}}, {4096, 0}, {1 << 20, 1 << 20}, {{43, 1}}};
}

// ---------------------------------------------------------------------------------------
// Checkpoints.

template <>
inline ShardFile Sample<ShardFile>() {
  return {555, 3, "w1.1.5f3a9c1e.npy"};
}

template <>
inline ValueFile Sample<ValueFile>() {
  return {"step.0.5f3a9c1e.npy", DType::kI32, {1}};
}

template <>
inline SaveShards Sample<SaveShards>() {
  return {42, "runs/mlp", {Sample<ShardFile>()}, {Sample<ValueFile>()}};
}

template <>
inline FileWritten Sample<FileWritten>() {
  return {"w1.1.5f3a9c1e.npy", 2176, 0xcbf43926};
}

template <>
inline SaveShardsReply Sample<SaveShardsReply>() {
  return {{Sample<FileWritten>()}};
}

template <>
inline CommitCheckpoint Sample<CommitCheckpoint>() {
  return {42, "runs/mlp", "{\"format\": \"atoll-checkpoint\"}", {"w1.1.5f3a9c1e.npy"}};
}

template <>
inline ReadCheckpointIndex Sample<ReadCheckpointIndex>() {
  return {42, "runs/mlp"};
}

template <>
inline CheckpointIndexText Sample<CheckpointIndexText>() {
  return {"{\"format\": \"atoll-checkpoint\"}"};
}

template <>
inline FilePiece Sample<FilePiece>() {
  return {"w1.1.5f3a9c1e.npy", 2176, 0xcbf43926, {16, 32}, {8, 0}, {8, 32}, {0, 4}};
}

template <>
inline ShardFromFiles Sample<ShardFromFiles>() {
  return {556, 2, DType::kI32, {8, 36}, {Sample<FilePiece>()}};
}

template <>
inline LoadShards Sample<LoadShards>() {
  return {42, "runs/mlp", {Sample<ShardFromFiles>()}};
}

}  // namespace atl::proto::samples
