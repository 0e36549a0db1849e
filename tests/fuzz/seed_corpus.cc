// Writes the seed corpora of the message harnesses from real messages (sample_messages.h):
// every single-frame sample for the header and message harnesses, every message with data
// frames (the TupleBatches, joined as fuzz_frames.h says) for the tuples harness, events
// for the events harness. scripts/fuzz.sh
// adds the job files and configs as text seeds.
//   atoll-fuzz-seeds OUT_DIR   -> OUT_DIR/{header,message,tuples,event}/<name>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

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
  for (const char* dir : {"header", "message", "tuples", "event"}) {
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
