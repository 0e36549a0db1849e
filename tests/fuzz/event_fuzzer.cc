// The event stream as watchers read it (`atoll watch`, `top`, `dashboard`): any topic and
// body given to DecodeEvent come back as an event or InvalidArgument, and every event that
// decodes can be printed as a line and written as JSON (`atoll watch --json`, the
// dashboard). Anyone who can publish to the RM's event input reaches them.
#include <cstdint>
#include <cstdlib>

#include "common/net/event_reader.h"
#include "tests/fuzz/fuzz_frames.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto frames = atl::fuzz::SplitFrames(data, size);
  if (frames.size() != 2) return 0;  // a watcher takes two-frame messages only
  auto event = atl::DecodeEvent(frames[0], frames[1]);
  if (!event.ok()) {
    if (event.status().code() != atl::Code::kInvalidArgument) std::abort();
    return 0;
  }
  (void)atl::FormatEventLine(*event);
  nlohmann::json json = event->fields;
  json["topic"] = event->topic;
  (void)json.dump();  // throws on strings that are not UTF-8
  return 0;
}
