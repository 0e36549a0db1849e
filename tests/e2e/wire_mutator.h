// Mutated real messages for fuzzing running services: each Next() takes one of the
// recorded messages (multipart, frames as bytes) and applies one to three mutations:
// bit flips, truncation, a splice with another message, a random kind, a wrong number of
// frames, an oversize declared length (a msgpack array, map, string or binary header
// claiming 4 GiB), or random bytes. Deterministic for a seed, so a failure can be replayed.
// Pure: no sockets (tests/e2e/wire_sender.h sends what it makes).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace atl::testing {

using WireMessage = std::vector<std::string>;  // frames

class WireMutator {
 public:
  // `recorded`: real messages to start from (not empty, no message without frames).
  WireMutator(std::vector<WireMessage> recorded, uint64_t seed);

  WireMessage Next();

 private:
  enum Mutation {
    kFlipBits,
    kTruncate,
    kSplice,
    kRandomKind,
    kWrongFrameCount,
    kOversizeLength,
    kRandomBytes,
    kNumMutations,
  };
  void Mutate(Mutation mutation, WireMessage& message);
  std::string& AnyFrame(WireMessage& message);
  const WireMessage& AnyRecorded();
  size_t Below(size_t n);  // uniform in [0, n); 0 when n is 0
  std::string RandomBytes(size_t n);

  std::vector<WireMessage> recorded_;
  std::mt19937_64 rng_;
};

}  // namespace atl::testing
