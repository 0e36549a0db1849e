// What an executor reports when shards of a gang are done, for the IslandOrder tests.
#pragma once

#include <cstdint>

#include "common/proto/protocol.h"

namespace atl::scheduler {

// A report of `shards` shards of gang `seq` done, each busy for `busy_us`.
inline proto::GangDone DoneReport(uint64_t seq, uint32_t shards, uint64_t busy_us = 10) {
  proto::GangDone done;
  done.gang_seq = seq;
  done.shards = shards;
  done.busy_us = busy_us;
  return done;
}

}  // namespace atl::scheduler
