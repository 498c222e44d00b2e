#pragma once
// The pipeline's global-list gather with its size carried from step to step.

#include <cstdint>
#include <span>
#include <string>

#include "thdpack/pipeline/pipeline.hpp"

namespace thdpack::detail {

/// What a pipeline's gathers learned about their size. Where every world rank is a reader of its
/// own DP index (tp = cp = pp = 1), a gather whose lists all fit `width` bytes moves headers and
/// lists in one allgather of equal blocks instead of two collectives; after every gather `width`
/// is set to that gather's largest list plus a quarter (not a high-water mark: it shrinks when a
/// gather's lists are smaller than the last's). It changes only with gathered data, so every rank
/// that runs the same gathers holds the same value, as the one-allgather form needs.
struct GatherSizing {
  /// Bytes of list per block; 0 (also wherever some rank is not the reader of its DP index): two
  /// collectives, the headers and then the lists.
  int64_t width = 0;
};

/// gather_global_batch with `sizing` (read and updated identically on every rank).
GlobalBatch gather_global_batch(Communicator& world, const PipelineOptions& options,
                                std::span<const SampleView> local_samples,
                                std::span<const int64_t> group_ids, GatherSizing& sizing);

/// fail_global_batch_gather for peers that gather with `sizing`; updates `sizing` from the
/// gathered headers as the peers do, so that the next step's gather has the same shape on every
/// rank.
[[noreturn]] void fail_global_batch_gather(Communicator& world, const Topology& topology,
                                           const std::string& error, GatherSizing& sizing);

}  // namespace thdpack::detail
