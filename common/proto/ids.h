// Ids that clients make themselves (so that no call waits for one): the client's id in the
// high bits, so that any service can tell whose an object or a run is without asking.
#pragma once

#include <cstdint>

namespace atl::proto {

inline constexpr int kObjectClientShift = 40;  // 2^40 objects per client
inline constexpr int kRunClientShift = 32;     // 2^32 runs per client

inline uint64_t MakeObjectId(uint64_t client, uint64_t n) {
  return (client << kObjectClientShift) | n;
}
inline uint64_t ClientOfObject(uint64_t object_id) { return object_id >> kObjectClientShift; }
inline uint64_t MakeRunId(uint64_t client, uint64_t n) { return (client << kRunClientShift) | n; }
inline uint64_t ClientOfRun(uint64_t run_id) { return run_id >> kRunClientShift; }

}  // namespace atl::proto
