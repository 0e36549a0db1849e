// What a scheduler checks before it queues a client's submission: a SubmitProgram is
// written by its client, and executors (cluster members) would run whatever it says, so
// every id in it must be the submitting client's own. Members (another service) and
// plain-text peers may submit for any client, but only for one that is connected.
#pragma once

#include "atoll/status.h"
#include "common/proto/codec.h"
#include "common/service/owner_cache.h"

namespace atl::scheduler {

// PermissionDenied, naming the first id that is not the client's, unless: the sender holds
// the key the program's client connected with; the run id is one of the client's; every
// entry is that run's and owned by that client; every object it reads or writes in a store
// is the client's (object ids name their client); every function it calls was registered
// by the client. NotFound when the client is not connected (for members too), Cancelled
// when it has left; Unavailable when the RM cannot be asked.
Status CheckSubmission(const proto::Peer& sender, const proto::SubmitProgram& program,
                       OwnerCache& owners);

// The same for a CancelRun: the sender is the client, and the run is one of the client's.
Status CheckCancel(const proto::Peer& sender, const proto::CancelRun& cancel, OwnerCache& owners);

}  // namespace atl::scheduler
