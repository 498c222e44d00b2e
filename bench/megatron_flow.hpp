#pragma once
// The baseline of BENCHMARKS.md figure 8: a Megatron-style data flow implemented over the same
// Communicator, for measuring against the pipeline in the same run. Per step:
//   - readers (TP rank 0 of the first and last stage) allgather counts, then lengths, over DP;
//   - one alltoallv per field (tokens, labels, loss_mask, position_ids, real and padded lengths)
//     moving whole samples to every CP rank of their replica, which packs and slices afterwards;
//   - per micro-batch TP broadcasts (one per field plus one of metadata), plus the counts;
//   - a PP broadcast of every micro-batch's metadata from the first stage.
// It uses the same plan as the pipeline, so only the data movement differs.

#include "thdpack/comm/communicator.hpp"
#include "thdpack/comm/process_groups.hpp"
#include "thdpack/pipeline/pipeline.hpp"

namespace thdpack::bench {

struct FlowStep {
  int64_t collectives = 0;
  int64_t bytes_sent = 0;
  int64_t exchange_bytes = 0;
  double seconds = 0;
  int64_t microbatches = 0;
};

/// Collective over `world` (and the groups split from it).
FlowStep megatron_style_step(Communicator& world, ProcessGroups& groups,
                             const PipelineOptions& options, std::span<const Sample> local);

}  // namespace thdpack::bench
