#pragma once
// Moving rows: the sample exchange over a DP group (step 3) and the TP broadcast (step 4).

#include <span>
#include <vector>

#include "pipeline/pack_segments.hpp"
#include "thdpack/comm/communicator.hpp"

namespace thdpack::detail {

/// Fills `microbatches` (this rank's K micro-batches from empty_microbatch) with the rows of
/// `fields`. `sample_rows[i]` holds every row of this rank's i-th local sample (a one-sample pack).
/// One alltoallv over `dp_group`; rows that stay on this DP rank are copied, not sent.
void exchange_samples(Communicator& dp_group, const StepGeometry& geometry,
                      std::span<const PackedBatch> sample_rows, StageFields fields,
                      std::vector<PackedBatch>& microbatches);

/// Rank 0 of `tp_group` sends the rows of `fields` of all its micro-batches to the others in one
/// broadcast; the others' micro-batches must already have the right sizes.
void broadcast_rows(Communicator& tp_group, StageFields fields,
                    std::vector<PackedBatch>& microbatches);

}  // namespace thdpack::detail
