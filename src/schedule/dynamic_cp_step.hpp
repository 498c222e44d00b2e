#pragma once
// The modeled step of a dynamic-CP plan (DynamicCpStats::step) without the lower bound: what a
// scheduler compares when it keeps the faster of two plans.

#include <optional>
#include <span>

#include "schedule/length_by_id.hpp"
#include "schedule/length_order.hpp"
#include "schedule/time_cache.hpp"
#include "thdpack/schedule/cp_cost_model.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"

namespace thdpack::detail {

/// One micro-batch's modeled height: its slowest group's Σ time(length, group size), summed in
/// member order. Throws InvalidArgument when it holds an id `length_of` does not know.
double microbatch_height(const DynamicCpMicrobatch& mb, const LengthById& length_of,
                         TimeCache& time);

/// Σ over micro-batches of microbatch_height, in plan order. Throws
/// InvalidArgument when the plan holds an id `length_of` does not know.
double modeled_step(const DynamicCpPlan& plan, const LengthById& length_of,
                    const CpCostModel& cost);

/// DynamicCpStats::lower_bound of samples grouped by length (group_by_length), up to rounding:
/// no plan's modeled step under `cost` is below it.
double lower_bound(const LengthGroups& by_length, const DynamicCpOptions& options,
                   const CpCostModel& cost);

/// A plan and, where known, its modeled step (bit-identical to modeled_step's).
struct ScoredPlan {
  DynamicCpPlan plan;
  std::optional<double> step;
};

/// schedule_default_dynamic_cp's plan of validated input, given as its samples grouped by length
/// (group_by_length, made once where two planners need it); with `cost`, also its modeled step
/// under it, summed as the rounds lay the micro-batches out (lengths at hand, no lookup by id),
/// unless a VPP split regrouped them. Throws as schedule_default_dynamic_cp does.
ScoredPlan default_dynamic_cp_scored(const LengthGroups& by_length, const DynamicCpOptions& options,
                                     const CpCostModel* cost);

}  // namespace thdpack::detail
