#pragma once
// Scheduling items: single samples, or whole groups when group ids are given. Schedulers place
// items; a plan lists the samples of its items. Shared by the "balanced" and "local" schedulers.

#include <cstdint>
#include <span>
#include <vector>

#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::detail {

struct ScheduleItems {
  std::vector<int64_t> lengths;  ///< padded tokens of each item
  std::vector<double> costs;     ///< modeled cost of each item (sum over its samples)
  std::vector<int> source_rank;  ///< DP rank that holds the item's samples
  /// Samples of item i: input positions positions[offsets[i] .. offsets[i+1]), in input order.
  std::vector<int64_t> offsets{0};
  std::vector<int64_t> positions;
  bool grouped = false;

  int64_t size() const { return static_cast<int64_t>(lengths.size()); }
  int64_t first_position(int64_t item) const {
    return positions[static_cast<size_t>(offsets[static_cast<size_t>(item)])];
  }
};

/// Items of a validated input. With group ids, items are groups in order of first appearance; a
/// group whose samples sit on different DP ranks is an InvalidArgument when `same_rank_groups`.
/// Every item must fit the capacity (InvalidArgument otherwise).
ScheduleItems build_items(const ScheduleInput& input, const ScheduleOptions& options,
                          bool same_rank_groups);

/// First input position of each DP rank's samples (size dp+1).
std::vector<int64_t> rank_starts(const ScheduleInput& input, int dp);

/// Packs of items in plan order: pack p holds items[offsets[p] .. offsets[p+1]).
struct PackLists {
  std::vector<int64_t> offsets{0};
  std::vector<int64_t> items;
};

/// The plan whose pack p holds the samples of the items of packs pack p, each pack listing its
/// samples by increasing input position.
/// The same where every item is the sample at its input position (no group ids): packs.items are
/// input positions. Needs no ScheduleItems.
Plan plan_from_sample_packs(int dp, int cp, const PackLists& packs, const ScheduleInput& input);

Plan plan_from_packs(int dp, int cp, const PackLists& packs, const ScheduleItems& items,
                     const ScheduleInput& input);

/// The smallest multiple of `multiple` that is >= value.
inline int64_t round_up_to(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace thdpack::detail
