#pragma once
// Lower bounds on the slowest replica's cost, shared by plan statistics and the balanced scheduler.

#include <cstdint>
#include <span>

namespace thdpack::detail {

/// step_cost_tight_bound (plan_stats.hpp) for costs already sorted in decreasing order.
double tight_bound_of_sorted(std::span<const double> descending, int dp);

}  // namespace thdpack::detail
