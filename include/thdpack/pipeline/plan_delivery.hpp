#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// What every rank of the dp×cp group receives under a plan (plan.hpp), fixed or dynamic CP,
// computed in one process: for each micro-batch, the whole pack of the rank's CP group (its samples
// in plan order) sliced over the group's size, with the rank's position in the group. The reference
// a distributed delivery is checked against (reference_microbatches in pipeline.hpp adds the
// topology: truncation to the gathered lengths and the fields of the rank's PP stage).

#include <cstdint>
#include <functional>
#include <vector>

#include "thdpack/core/dataset.hpp"
#include "thdpack/packing/cp_partition.hpp"
#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/schedule/plan.hpp"

namespace thdpack {

struct RankMicrobatch {
  PackedBatch pack;       ///< this rank's slice (cp_size = local_cp_size, cp_rank = rank − first)
  int local_cp_size = 1;  ///< size of the rank's CP group in this micro-batch
  int group_first_rank = 0;  ///< the group's members are [group_first_rank, + local_cp_size)
};

/// Rank `rank` (0 <= rank < plan.ranks(), a dp×cp index) of every micro-batch of `plan`.
/// sample_of(id) returns the sample with that id. Each group's samples are packed with `options`
/// and sliced with `mode` over the group's size, so options.divisor must be a multiple of 2·size
/// for every group of more than one rank (2·cp with fixed CP, 2·dp·cp with dynamic CP). Throws
/// InvalidArgument on a rank out of range, a divisor a group size does not divide, and whatever
/// pack_samples throws (a group over options.capacity).
std::vector<RankMicrobatch> rank_microbatches(const Plan& plan,
                                              const std::function<Sample(int64_t)>& sample_of,
                                              const PackOptions& options, int rank,
                                              CpMode mode = CpMode::kZigzag);

}  // namespace thdpack
