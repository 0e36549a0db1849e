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
