// Checkpoint files, which a store and a client read from disk: the first byte picks the
// reader (even: an .npy file, odd: an index), the rest is the file. Either comes back as a
// value or InvalidArgument; what parses is written again to the same value.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "common/checkpoint/index.h"
#include "common/checkpoint/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto* bytes = reinterpret_cast<const std::byte*>(data) + 1;
  if (data[0] % 2 == 0) {
    auto tensor = atl::checkpoint::ParseNpy({bytes, size - 1});
    if (!tensor.ok()) {
      if (tensor.status().code() != atl::Code::kInvalidArgument) std::abort();
      return 0;
    }
    auto header = atl::checkpoint::EncodeNpyHeader(tensor->dtype(), tensor->shape());
    if (!header.ok()) std::abort();
    std::string file = *header;
    file.append(reinterpret_cast<const char*>(tensor->data()), tensor->nbytes());
    auto again =
        atl::checkpoint::ParseNpy({reinterpret_cast<const std::byte*>(file.data()), file.size()});
    if (!again.ok() || !(*again == *tensor)) std::abort();
    return 0;
  }
  auto index = atl::checkpoint::IndexFromJson({reinterpret_cast<const char*>(data) + 1, size - 1});
  if (!index.ok()) {
    if (index.status().code() != atl::Code::kInvalidArgument) std::abort();
    return 0;
  }
  auto again = atl::checkpoint::IndexFromJson(atl::checkpoint::IndexToJson(*index));
  if (!again.ok() || !(*again == *index)) std::abort();
  return 0;
}
