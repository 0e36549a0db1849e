// The job format (`atoll submit`): any text given to ParseJob comes back as a job or
// InvalidArgument, and every function of a job that parses is built (not registered) or
// refused with a Status.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "job/job.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto job = atl::ParseJob(text, "fuzz.toml");
  if (!job.ok()) {
    if (job.status().code() != atl::Code::kInvalidArgument) std::abort();
    return 0;
  }
  for (const auto& function : job->functions) (void)atl::BuildJobFunction(function);
  return 0;
}
