// The screen of `atoll top`, as text lines, from a ClusterView. Kept apart from the command
// (top.cc) so that tests can render a view without a terminal.
//
// Layout (every device line matches `device <id> <kind> [<bar>] <busy>%`):
//   atoll top  rm tcp://...  1 islands  2 hosts (2 alive)  4 devices  2 clients  20:27:53
//
//   ISLAND / HOST / DEVICE   KIND  BUSY                         QUEUED   GANGS  MEMORY IN USE
//   island0                  scheduler tcp://127.0.0.1:33925         4
//     h0                           alive                                        512 B / 32 MiB
//       device 0             cpu   [#######.............]  35%       0      72  last: submit:spin
//   ...
//   CLIENTS                          SCHEDULED  RUNNING     DONE  FAILED
//     submit:beta (1)                        1        0       18       0
//   PROGRAMS (RUN)   CLIENT                       STATE      ISLANDS          PROGRESS
//     4294967315     submit:beta (1)              running    island0          6/8 shards
#pragma once

#include <string>
#include <vector>

#include "cli/cluster_view.h"

namespace atl {

struct TopRenderOptions {
  std::string rm_endpoint;   // shown in the title line
  std::string clock;         // "12:00:01", shown in the title line
  std::string notice;        // a warning line under the title (e.g. "RM not answering"); "" none
  size_t width = 120;        // lines are cut to this many characters; 0: no limit
  size_t height = 0;         // at most this many lines (programs are cut first); 0: no limit
  size_t max_programs = 20;  // programs listed at most (running ones first)
};

std::vector<std::string> RenderTop(const ClusterView& view, const TopRenderOptions& options);

// "12.0 MiB", "128 MiB", "512 B".
std::string FormatBytes(uint64_t bytes);

}  // namespace atl
