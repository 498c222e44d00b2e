#pragma once
// What every rank of the dp_cp group receives under a dynamic-CP plan (dynamic_cp.hpp), computed
// in one process: for each micro-batch, the whole pack of the rank's CP group (its samples in plan
// order) sliced by per-sample zigzag over the group's size, with the rank's position in the group.
// The reference a distributed dynamic-CP delivery is checked against.

#include <cstdint>
#include <functional>
#include <vector>

#include "thdpack/core/dataset.hpp"
#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"

namespace thdpack {

struct DynamicCpRankMicrobatch {
  PackedBatch pack;          ///< zigzag slice (cp_size = local_cp_size, cp_rank = rank − first)
  int local_cp_size = 1;     ///< size of the rank's CP group in this micro-batch
  int group_first_rank = 0;  ///< the group's members are [group_first_rank, + local_cp_size)
};

/// Rank `rank` (0 <= rank < plan.ranks) of every micro-batch of `plan`. sample_of(id) returns the
/// sample with that id. `options.divisor` must be a multiple of 2·G (padding_divisor with
/// dynamic_cp) so that any group size can slice every sample; options.capacity is ignored (a
/// group of c ranks holds up to M·c tokens, which the plan guarantees). Throws InvalidArgument
/// on a rank out of range or a divisor the group sizes do not divide.
std::vector<DynamicCpRankMicrobatch> dynamic_cp_rank_microbatches(
    const DynamicCpPlan& plan, const std::function<Sample(int64_t)>& sample_of,
    const PackOptions& options, int rank);

}  // namespace thdpack
