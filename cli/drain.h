// Draining a joined host before it stops: the RM moves the slices on its devices onto other
// devices of its island and tells their clients (DrainHost), so that they carry on without
// it. `atoll stop` drains every host record of the state dir; a foreground `atoll start
// host` (a container's main process) drains its host when told to stop.
#pragma once

#include "launcher/cluster_info.h"

namespace atl {

// Asks the RM of `info` (as a member, with the record's keys) to drain each host whose
// executor the record holds, and prints what moved on stdout. A host the RM cannot drain
// (it is gone, or does not answer) is reported on stderr and left to the RM to notice.
void DrainHosts(const ClusterInfo& info);

}  // namespace atl
