#pragma once
// The CP group sizes a sample may run on under dynamic CP.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "thdpack/schedule/dynamic_cp.hpp"

namespace thdpack::detail {

/// Ascending sizes a sample of `length` tokens may use: cp_min·2^j <= G, then G itself when it is
/// not one of those and the sample fits (length <= M·G). Empty when the sample needs more than G.
/// `sizes` is cleared and filled (no allocation once it has room: planners call this per sample).
inline void candidate_cp_sizes(int64_t length, const ScheduleOptions& o, std::vector<int>& sizes) {
  sizes.clear();
  const int ranks = o.ranks();
  for (int64_t c = cp_min_for_length(length, o.max_seqlen_per_dp_cp_rank, o.min_cp); c <= ranks;
       c *= 2) {
    sizes.push_back(static_cast<int>(c));
  }
  if ((sizes.empty() || sizes.back() != ranks) &&
      length <= o.max_seqlen_per_dp_cp_rank * static_cast<int64_t>(ranks)) {
    sizes.push_back(ranks);
  }
}
inline std::vector<int> candidate_cp_sizes(int64_t length, const ScheduleOptions& o) {
  std::vector<int> sizes;
  candidate_cp_sizes(length, o, sizes);
  return sizes;
}

/// The size of `sizes` with the smallest area (cp·time); ties go to the smaller size.
inline int least_area_cp_size(int64_t length, const std::vector<int>& sizes,
                              const CostModel& cost) {
  int best = sizes.front();
  double best_area = cost.area(length, best);
  for (const int c : sizes) {
    const double a = cost.area(length, c);
    if (a < best_area) {
      best = c;
      best_area = a;
    }
  }
  return best;
}

/// A sample's share of PlanStats::step_lower_bound: its least rank-time over its allowed
/// `sizes` (non-empty), and its least time.
struct SampleBound {
  double area;
  double time;
};
inline SampleBound sample_bound(int64_t length, const std::vector<int>& sizes,
                                const CostModel& cost) {
  double best_time = cost.time(length, sizes.front());
  for (const int c : sizes) best_time = std::min(best_time, cost.time(length, c));
  return {cost.area(length, least_area_cp_size(length, sizes, cost)), best_time};
}

}  // namespace thdpack::detail
