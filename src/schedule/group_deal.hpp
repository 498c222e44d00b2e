#pragma once
// Groups dealt whole to DP replicas: longest-processing-time over the groups (costliest first, each
// to the cheapest replica) and Karmarkar-Karp differencing, each repaired until every replica can
// make the common micro-batch count, then refined by moves and swaps of whole groups. One of the
// candidate plans of plan_with_oversize_groups (oversize_groups.hpp) for inputs where some group
// exceeds one pack.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::detail {

/// Each replica's packs in micro-batch order, every replica with `k` packs; a pack lists input
/// positions, increasing.
struct GroupDeal {
  std::vector<std::vector<std::vector<int64_t>>> replicas;
  int64_t k = 0;
  double slowest = 0;  ///< the costliest replica's summed sample cost
};

/// The plan of a validated input with group ids (every sample no longer than the capacity C):
/// groups whose padded total exceeds C put their samples in consecutive packs of one replica, the
/// other groups stay in one pack. `cost` is each input position's modeled cost.
///
/// Of the starts (longest-first, differencing, equal-count differencing), the one with the cheaper
/// slowest replica after repair and refinement is kept, so every replica's load is at most that of
/// the plain longest-first deal of the groups whenever that deal can be given equal micro-batch
/// counts; where it cannot (a replica holds fewer samples and whole groups than the count the
/// others need), groups move or swap between replicas until it can. std::nullopt when neither start
/// could be repaired.
std::optional<GroupDeal> deal_groups_longest_first(const ScheduleInput& input,
                                                   const ScheduleOptions& options,
                                                   std::span<const double> cost);

}  // namespace thdpack::detail
