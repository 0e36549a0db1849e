// GPipe-style training of the residual MLP of model.h: block s on its own slice (stage s);
// each step's batch is cut into M micro-batches that flow forward through the stages, into
// a cross-entropy head on the last stage, and backward again; each stage sums its
// micro-batches' gradients (inside its backward function) and takes an SGD step. One step
// is ONE traced program of 2 x S x M block calls, M head calls and S updates, dispatched
// asynchronously: stages work on different micro-batches at the same time.
// Placing every stage on one slice gives the single-device run it is checked against.
#pragma once

#include <functional>
#include <vector>

#include "atoll/client.h"
#include "atoll/status.h"
#include "examples/pipeline/model.h"

namespace atl::examples {

// Trains with stage s on slices[s] (one slice per stage; the same slice may repeat).
Result<PipelineResult> TrainPipeline(Client& client, const std::vector<Slice>& slices,
                                     const PipelineConfig& config,
                                     const std::function<void(const PipelineStep&)>& on_step = {});

}  // namespace atl::examples
