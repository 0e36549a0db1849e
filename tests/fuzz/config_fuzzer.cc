// The cluster config: any text given to ParseClusterConfig comes back as a config or
// InvalidArgument, and FindHost works on every config that parses.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/service/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = atl::ParseClusterConfig(text, "fuzz.toml");
  if (!config.ok()) {
    if (config.status().code() != atl::Code::kInvalidArgument) std::abort();
    return 0;
  }
  for (const auto& island : config->islands) {
    for (const auto& host : island.hosts) {
      auto found = atl::FindHost(*config, host.name);
      if (!found.ok()) std::abort();
    }
  }
  return 0;
}
