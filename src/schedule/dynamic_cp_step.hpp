#pragma once
// The modeled step of a dynamic-CP plan (PlanStats::step_cost) without the lower bound: what a
// scheduler compares when it keeps the faster of two plans.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>

#include "schedule/length_by_id.hpp"
#include "schedule/length_order.hpp"
#include "schedule/plan_draft.hpp"
#include "schedule/time_cache.hpp"
#include "thdpack/schedule/cost_model.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"

namespace thdpack::detail {

/// Throws InvalidArgument: sample `id` of a plan is not in its input.
[[noreturn]] void throw_unknown_sample(int64_t id);

/// One micro-batch's modeled height: its slowest group's Σ time(length, group size), summed in
/// member order. `groups` is a range of CpGroup or CpGroupView (a draft's or a plan's micro-batch).
/// Throws InvalidArgument when it holds an id `length_of` does not know.
template <class Groups>
double microbatch_height(const Groups& groups, const LengthById& length_of, TimeCache& time) {
  double slowest = 0;
  for (const auto& g : groups) {
    double t = 0;
    for (const int64_t id : g.ids) {
      const int64_t length = length_of(id);
      if (length < 0) throw_unknown_sample(id);
      t += time(length, g.size);
    }
    slowest = std::max(slowest, t);
  }
  return slowest;
}

/// Σ over micro-batches of microbatch_height, in plan order. Throws
/// InvalidArgument when the plan holds an id `length_of` does not know.
double modeled_step(const detail::DraftPlan& plan, const LengthById& length_of,
                    const CostModel& cost);
double modeled_step(const Plan& plan, const LengthById& length_of, const CostModel& cost);

/// PlanStats::step_lower_bound of samples grouped by length (group_by_length), up to rounding:
/// no plan's modeled step under `cost` is below it.
double lower_bound(const LengthGroups& by_length, const ScheduleOptions& options,
                   const CostModel& cost);

/// A plan and, where known, its modeled step (bit-identical to modeled_step's).
struct ScoredPlan {
  Plan plan;
  std::optional<double> step;
};

/// schedule_default_dynamic_cp's plan of validated input, given as its samples grouped by length
/// (group_by_length, made once where two planners need it); with `cost`, also its modeled step
/// under it, summed as the rounds lay the micro-batches out (lengths at hand, no lookup by id),
/// unless a VPP split regrouped them. Throws as schedule_default_dynamic_cp does.
ScoredPlan default_dynamic_cp_scored(const LengthGroups& by_length, const ScheduleOptions& options,
                                     const CostModel* cost);

}  // namespace thdpack::detail
