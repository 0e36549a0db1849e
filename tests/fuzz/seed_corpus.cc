// Writes the seed corpora of the message harnesses from real messages (sample_messages.h):
// every single-frame sample for the header and message harnesses, every message with data
// frames (the TupleBatches, joined as fuzz_frames.h says) for the tuples harness, events
// for the events harness, .npy files and an index for the checkpoint harness (after the
// byte that picks its reader). scripts/fuzz.sh adds the job files and configs as text seeds.
//   atoll-fuzz-seeds OUT_DIR   -> OUT_DIR/{header,message,tuples,event,checkpoint}/<name>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <msgpack.hpp>

#include "common/checkpoint/index.h"
#include "common/checkpoint/npy.h"
#include "tests/fuzz/fuzz_frames.h"
#include "tests/fuzz/sample_messages.h"

namespace atl::fuzz {
namespace {

namespace fs = std::filesystem;

bool Write(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

// Functions for function_fuzzer to start from: the message sample (with a collective and a
// body), an elementwise chain the interpreter fuses, and jax.lax rows (a broadcast into a
// cut dimension, dot_general, a reshape and a reduction).
std::vector<std::pair<std::string, ir::FunctionDef>> SampleFunctions() {
  using ir::OpCode;
  using ir::Operand;
  const Operand x{Operand::kInput, 0, 0.0};
  auto op = [](int32_t i) { return Operand{Operand::kOp, i, 0.0}; };
  auto scalar = [](double v) { return Operand{Operand::kScalar, 0, v}; };
  const ir::TensorType v{DType::kF32, {16}, {-1}};
  ir::FunctionDef chain{"chain", {v}, {}, {}, {}, {}};
  chain.ops = {{OpCode::kMul, {x, x}, 0, v},
               {OpCode::kExp, {op(0)}, 0, v},
               {OpCode::kAdd, {op(1), scalar(1)}, 0, v},
               {OpCode::kTanh, {op(2)}, 0, v}};
  chain.outputs = {op(3), op(1)};
  const ir::TensorType row{DType::kF32, {1, 6}, {-1, -1}};
  const ir::TensorType cut{DType::kF32, {4, 3, 6}, {0, -1, -1}};
  const ir::TensorType bmk{DType::kF32, {4, 3, 6}, {0, -1, -1}};
  const ir::TensorType out{DType::kF32, {4, 3, 3}, {0, -1, -1}};
  ir::FunctionDef lax{"lax", {row, bmk}, {}, {}, {2}, {}};
  lax.ops = {{OpCode::kBroadcastInDim, {x}, 1, cut, {4, 3, 6, 0, 2}},
             {OpCode::kAdd, {op(0), Operand{Operand::kInput, 1, 0.0}}, 0, cut},
             {OpCode::kDotGeneral, {op(1), op(1)}, -1, out, {1, 2, 1, 2, 1, 0, 1, 0}},
             {OpCode::kReshape, {op(2)}, 0, {DType::kF32, {4, 9}, {0, -1}}, {4, 9}},
             {OpCode::kReduceMax, {op(3)}, 0, {DType::kF32, {4}, {0}}, {1}}};
  lax.outputs = {op(4)};
  return {{"sample", proto::samples::Sample<ir::FunctionDef>()}, {"chain", chain}, {"lax", lax}};
}

int WriteSeeds(const fs::path& out) {
  for (const char* dir : {"header", "message", "tuples", "event", "checkpoint"}) {
    fs::create_directories(out / dir);
  }
  bool ok = true;
  for (const SampleMessage& sample : SampleMessages()) {
    const std::string bytes = JoinFrames(sample.frames);
    if (sample.frames.size() > 1) {
      ok &= Write(out / "tuples" / sample.name, bytes);
    } else {
      for (const char* dir : {"header", "message"}) ok &= Write(out / dir / sample.name, bytes);
    }
  }
  for (const SampleMessage& event : SampleEvents()) {
    ok &= Write(out / "event" / event.name, JoinFrames(event.frames));
  }
  for (size_t code = 0; code < kNumDTypes; ++code) {  // a file of each dtype
    const auto dtype = static_cast<DType>(code);
    const std::vector<double> values = dtype == DType::kBool
                                           ? std::vector<double>{1, 0, 1, 1, 0, 1}
                                           : std::vector<double>{1, 2, 3, 4, 5, 6};
    const Tensor t = Tensor::FromDoubles(dtype, {2, 3}, values).value();
    const std::string data(reinterpret_cast<const char*>(t.data()), t.nbytes());
    ok &= Write(
        out / "checkpoint" / ("npy-" + std::string(DTypeName(dtype))),
        std::string(1, '\0') + checkpoint::EncodeNpyHeader(t.dtype(), t.shape()).value() + data);
  }
  checkpoint::Index index;
  index.tensors.push_back(
      {"w",
       DType::kF32,
       {4, 2},
       {2},
       {0, -1},
       {{"w.0.t.npy", {0, 0}, {2, 2}, 144, 1, "h0"}, {"w.1.t.npy", {2, 0}, {2, 2}, 144, 2, "h1"}}});
  ok &= Write(out / "checkpoint" / "index", "\x01" + checkpoint::IndexToJson(index));
  fs::create_directories(out / "function");
  for (const auto& [name, fn] : SampleFunctions()) {
    msgpack::sbuffer packed;
    msgpack::pack(packed, fn);
    ok &= Write(out / "function" / name, std::string(packed.data(), packed.size()));
  }
  if (!ok) std::fprintf(stderr, "cannot write the seeds under %s\n", out.c_str());
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace atl::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  return atl::fuzz::WriteSeeds(argv[1]);
}
