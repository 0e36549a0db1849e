// Real messages, as services send them, for fuzzing: one encoded sample of every message
// kind (tests/common/proto/samples.h, in the kind table's order), and TupleBatch messages
// with their data frames as an executor builds them (TupleFrames: packed and unpacked
// tensors, an error, reshard blocks, routed rows, a collective partial). The seed corpora
// (seed_corpus.cc) and the process-level fuzz test (tests/e2e/wire_fuzz_test.cc) start
// from these. SampleEvents: events as services publish them (topic frame, body frame).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/net/events.h"
#include "common/net/transport.h"
#include "common/proto/codec.h"
#include "common/proto/message_types.h"
#include "services/executor/tuple_frames.h"
#include "tests/common/proto/samples.h"

namespace atl::fuzz {

struct SampleMessage {
  std::string name;    // the kind's name, or what the batch holds ("tuples-packed", ...)
  net::Frames frames;  // header, then data frames
};

namespace internal {

// A TupleBatch of `tuples` with `values`: header frame, then the frames TupleFrames made.
inline SampleMessage Batch(std::string name, std::vector<proto::TupleHeader> tuples,
                           std::vector<Result<Tensor>> values) {
  executor::TupleFrames data;
  for (size_t i = 0; i < tuples.size(); ++i) data.Add(tuples[i], std::move(values[i]));
  net::Frames frames = data.Take();
  frames.insert(frames.begin(), proto::EncodeHeader(1, proto::TupleBatch{std::move(tuples)}));
  return {"tuples-" + name, std::move(frames)};
}

inline proto::TupleHeader Whole() {
  proto::TupleHeader h;
  h.run_id = 7;
  return h;
}

// One of two blocks of a resharded f32[4] shard.
inline proto::TupleHeader Block(int64_t begin) {
  proto::TupleHeader h = Whole();
  h.pieces = 2;
  h.dst_begin = {begin};
  h.dst_shape = {4};
  return h;
}

// The rows producer `part` of two routed to a shard.
inline proto::TupleHeader Rows(uint32_t part) {
  proto::TupleHeader h = Whole();
  h.kind = proto::TupleHeader::kRows;
  h.pieces = 2;
  h.part = part;
  return h;
}

}  // namespace internal

inline std::vector<SampleMessage> SampleMessages() {
  using internal::Batch;
  std::vector<SampleMessage> out;
  proto::ForEachMessageType([&]<typename T>() {
    net::Frames frames;
    frames.push_back(proto::EncodeHeader(1, proto::samples::Sample<T>()));
    out.push_back({std::string(proto::KindName(T::kKind)), std::move(frames)});
  });
  const proto::TupleHeader whole = internal::Whole();
  proto::TupleHeader collective = whole;
  collective.kind = proto::TupleHeader::kCollective;
  const std::vector<float> large(executor::kPackBytes / sizeof(float) + 1, 1.5f);
  out.push_back(
      Batch("packed", {whole, whole}, {Tensor::F32({2}, {1, 2}), Tensor::I32({3}, {1, 2, 3})}));
  out.push_back(
      Batch("unpacked", {whole, whole},
            {Tensor::F32({static_cast<int64_t>(large.size())}, large), Tensor::F32({1}, {4})}));
  out.push_back(
      Batch("error", {whole, whole}, {Cancelled("producer failed"), Tensor::F32({1}, {1})}));
  out.push_back(Batch("reshard", {internal::Block(0), internal::Block(2)},
                      {Tensor::F32({2}, {1, 2}), Tensor::F32({2}, {3, 4})}));
  out.push_back(Batch("rows", {internal::Rows(0), internal::Rows(1)},
                      {Tensor::F32({1, 2}, {1, 2}), Tensor::F32({0, 2}, {})}));
  out.push_back(Batch("collective", {collective}, {Tensor::F32({2}, {1, 2})}));
  return out;
}

// Events with every kind of field value, as EventPublisher sends them.
inline std::vector<SampleMessage> SampleEvents() {
  std::vector<SampleMessage> out;
  auto add = [&](std::string topic, const EventFields& fields) {
    net::Frames frames;
    frames.emplace_back(topic.data(), topic.size());
    frames.push_back(EncodeEventBody("executor/i0h0", fields));
    out.push_back({"event-" + topic, std::move(frames)});
  };
  add("gang.done", {{"run", uint64_t{5}},
                    {"node", uint64_t{1}},
                    {"host", std::string("i0h0")},
                    {"start_us", int64_t{-3}}});
  add("store.stats", {{"objects", uint64_t{3}}, {"ratio", 0.25}, {"lost", false}});
  add("error.executor", {{"error", std::string("InvalidArgument: malformed message")}});
  return out;
}

}  // namespace atl::fuzz
