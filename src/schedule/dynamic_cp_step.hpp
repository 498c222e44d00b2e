#pragma once
// The modeled step of a dynamic-CP plan (DynamicCpStats::step) without the lower bound: what a
// scheduler compares when it keeps the faster of two plans.

#include "schedule/length_by_id.hpp"
#include "thdpack/schedule/cp_cost_model.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"

namespace thdpack::detail {

/// Σ over micro-batches of the slowest group's Σ cost.time(length, group size). Throws
/// InvalidArgument when the plan holds an id `length_of` does not know.
double modeled_step(const DynamicCpPlan& plan, const LengthById& length_of,
                    const CpCostModel& cost);

}  // namespace thdpack::detail
