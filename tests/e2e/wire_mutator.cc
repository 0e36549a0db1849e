#include "tests/e2e/wire_mutator.h"

#include <utility>

namespace atl::testing {

namespace {

// A header is the msgpack array [version, kind, request id, body]: a fixarray byte, the
// version and the kind (every kind is below 128, one byte), so the kind is byte 2.
constexpr size_t kKindOffset = 2;

// msgpack headers that declare a length in the 4 bytes after them.
constexpr unsigned char kLengthMarkers[] = {0xdd /* array32 */, 0xdf /* map32 */, 0xdb /* str32 */,
                                            0xc6 /* bin32 */};

}  // namespace

WireMutator::WireMutator(std::vector<WireMessage> recorded, uint64_t seed)
    : recorded_(std::move(recorded)), rng_(seed) {}

WireMessage WireMutator::Next() {
  WireMessage message = AnyRecorded();
  const size_t mutations = 1 + Below(3);
  for (size_t i = 0; i < mutations; ++i) {
    Mutate(static_cast<Mutation>(Below(kNumMutations)), message);
  }
  return message;
}

void WireMutator::Mutate(Mutation mutation, WireMessage& message) {
  switch (mutation) {
    case kFlipBits: {
      std::string& frame = AnyFrame(message);
      if (frame.empty()) return;
      for (size_t n = 1 + Below(8); n > 0; --n) frame[Below(frame.size())] ^= char(1 << Below(8));
      return;
    }
    case kTruncate: {
      std::string& frame = AnyFrame(message);
      frame.resize(Below(frame.size()));
      return;
    }
    case kSplice: {
      const WireMessage& other = AnyRecorded();
      std::string& frame = message.front();
      const std::string& tail = other.front();
      frame = frame.substr(0, Below(frame.size() + 1)) + tail.substr(Below(tail.size() + 1));
      // Sometimes the other message's data frames too.
      if (Below(2) == 0) message.insert(message.end(), other.begin() + 1, other.end());
      return;
    }
    case kRandomKind: {
      std::string& header = message.front();
      if (header.size() > kKindOffset) header[kKindOffset] = static_cast<char>(Below(128));
      return;
    }
    case kWrongFrameCount:
      if (message.size() > 1 && Below(2) == 0) {
        message.erase(message.begin() + 1 + Below(message.size() - 1));  // a data frame less
      } else {
        message.push_back(Below(2) == 0 ? AnyFrame(message) : RandomBytes(Below(64)));
      }
      return;
    case kOversizeLength: {
      std::string& frame = AnyFrame(message);
      std::string claim(1, static_cast<char>(kLengthMarkers[Below(std::size(kLengthMarkers))]));
      claim += "\xff\xff\xff";
      claim += static_cast<char>(0xf0 | Below(16));
      frame.insert(Below(frame.size() + 1), claim);
      return;
    }
    case kRandomBytes:
      AnyFrame(message) = RandomBytes(Below(256));
      return;
    case kNumMutations:
      return;
  }
}

std::string& WireMutator::AnyFrame(WireMessage& message) {
  // The header half of the time: it is where decoding starts.
  return Below(2) == 0 ? message.front() : message[Below(message.size())];
}

const WireMessage& WireMutator::AnyRecorded() { return recorded_[Below(recorded_.size())]; }

size_t WireMutator::Below(size_t n) {
  return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
}

std::string WireMutator::RandomBytes(size_t n) {
  std::string bytes(n, '\0');
  for (char& b : bytes) b = static_cast<char>(Below(256));
  return bytes;
}

}  // namespace atl::testing
