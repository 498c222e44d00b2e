#pragma once
// Groups larger than one pack (a prompt with many long responses): their samples stay on one DP
// replica, spread over consecutive micro-batches, so that a replica-local group reduction still
// sees the whole group. Used by the "balanced" scheduler.

#include <optional>

#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::detail {

/// The plan of a validated input with group ids when some group's padded total exceeds the
/// capacity C = max_seqlen_per_dp_cp_rank · cp; std::nullopt when every group fits one pack (or
/// there are no group ids), leaving the plan to the scheduler.
///
/// Each oversize group becomes a run: its samples packed first-fit decreasing into consecutive
/// packs of one replica. The other items (whole groups, or samples) first fill the room the runs
/// leave, the rest is packed by "balanced" on one replica; runs, then packs, go by count-capped
/// longest-processing-time to the cheapest replica with room under a common micro-batch count K
/// (the smallest multiple of microbatch_multiple that fits), and a replica short of K splits its
/// costliest packs (a run's pack splits next to itself, so the run stays consecutive). The plan
/// also computed without filling the runs' room is kept instead when its slowest replica is
/// cheaper. Contracts of scheduler.hpp hold, except that K can exceed balanced's minimum.
/// Throws InvalidArgument for a sample longer than C, or too few items to give every replica K
/// non-empty packs.
std::optional<Plan> plan_with_oversize_groups(const ScheduleInput& input,
                                              const ScheduleOptions& options);

}  // namespace thdpack::detail
