#pragma once
// Plain LPT over first-fit packs, the baseline "balanced" must never be slower than: the items
// packed first-fit decreasing, the packs holding the most items split (the first such pack gives
// its last item a pack of its own) until dp x the micro-batch multiple divides their count, then
// the packs by decreasing cost (ties by pack) each to the least loaded replica (ties by index)
// that has fewer than count / dp: thdpack_planner_bench's baseline, item for item.

#include <optional>

#include "schedule/balanced_assignment.hpp"
#include "thdpack/packing/bin_packing.hpp"

namespace thdpack::detail {

/// The split first-fit packs of `ranked` (lengths within `capacity`), or nothing when there are
/// too few items for dp·multiple packs.
std::optional<Bins> split_first_fit_packs(const ScheduleItems& ranked, int dp, int64_t multiple,
                                          int64_t capacity);

/// The baseline's modeled step (as BalancedAssignment::step_cost), in O(n log n) with no
/// assignment built: cheap enough to bound every plan of a small input by it.
double lpt_step_cost(const ScheduleItems& ranked, const Bins& packs, int dp, int pp);

/// The baseline itself, for the rare input where no candidate gets below lpt_step_cost.
BalancedAssignment lpt_assignment(const ScheduleItems& ranked, const Bins& packs, int dp,
                                  int64_t capacity);

}  // namespace thdpack::detail
