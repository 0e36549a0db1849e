// The residual MLP of model.h trained data-parallel (SPMD), the baseline the pipeline is
// measured against: every device of one slice runs all S blocks on its share of the step's
// rows (M micro-batches' worth, split over the devices), the weight gradients are
// all-reduced and every device takes the same SGD step. One step is one traced program of
// S forward, one head, S backward and S update calls, each a gang over the whole slice.
// Reaches the pipeline's weights: the same batches, the same mean loss.
#pragma once

#include <functional>

#include "atoll/client.h"
#include "atoll/status.h"
#include "examples/pipeline/model.h"

namespace atl::examples {

// Trains on `slice`; its devices must divide the step's micro_batch * micro_batches rows.
// The modelled compute per call is the device's share of M micro-batches:
// forward_us * M / devices per block (backward likewise).
Result<PipelineResult> TrainDataParallel(
    Client& client, const Slice& slice, const PipelineConfig& config,
    const std::function<void(const PipelineStep&)>& on_step = {});

}  // namespace atl::examples
