// Modeled step time and lower bound of a dynamic-CP plan (definitions in dynamic_cp.hpp).

#include <algorithm>
#include <string>
#include <vector>

#include "schedule/dynamic_cp_sizes.hpp"
#include "schedule/dynamic_cp_step.hpp"
#include "schedule/time_cache.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"

namespace thdpack {

namespace detail {

void throw_unknown_sample(int64_t id) {
  fail("dynamic CP plan: sample ", id, " is not in the input");
}

double modeled_step(const detail::DraftPlan& plan, const LengthById& length_of,
                    const CostModel& cost) {
  TimeCache time(cost);
  double step = 0;
  for (const auto& mb : plan.microbatches) step += microbatch_height(mb.groups, length_of, time);
  return step;
}

double modeled_step(const Plan& plan, const LengthById& length_of, const CostModel& cost) {
  TimeCache time(cost);
  double step = 0;
  for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
    step += microbatch_height(plan.microbatch(k), length_of, time);
  }
  return step;
}

double lower_bound(const LengthGroups& by_length, const ScheduleOptions& options,
                   const CostModel& cost) {
  double area = 0;
  double longest = 0;
  std::vector<int> sizes;
  for (size_t g = 0; g < by_length.lengths.size(); ++g) {
    candidate_cp_sizes(by_length.lengths[g], options, sizes);
    if (sizes.empty()) continue;  // refused by the planners
    const SampleBound bound = sample_bound(by_length.lengths[g], sizes, cost);
    area += static_cast<double>(by_length.starts[g + 1] - by_length.starts[g]) * bound.area;
    longest = std::max(longest, bound.time);
  }
  return std::max(area / options.ranks(), longest);
}

}  // namespace detail

PlanStats evaluate_dynamic_cp_plan(const Plan& plan, std::span<const int64_t> ids,
                                   std::span<const int64_t> padded_lengths,
                                   const ScheduleOptions& options, const CostModel& cost) {
  double area = 0;
  double longest = 0;
  std::vector<int> sizes;
  for (size_t i = 0; i < ids.size(); ++i) {
    detail::candidate_cp_sizes(padded_lengths[i], options, sizes);
    check(!sizes.empty(), "sample ", ids[i], " needs more than dp*cp ranks");
    const detail::SampleBound bound = detail::sample_bound(padded_lengths[i], sizes, cost);
    area += bound.area;
    longest = std::max(longest, bound.time);
  }
  PlanStats stats;
  stats.num_samples = static_cast<int64_t>(ids.size());
  stats.num_microbatches = plan.num_microbatches();
  stats.num_groups = plan.num_groups();
  stats.step_lower_bound = std::max(area / options.ranks(), longest);
  stats.step_cost = detail::modeled_step(plan, detail::LengthById(ids, padded_lengths), cost);
  stats.step_ratio = stats.step_lower_bound > 0 ? stats.step_cost / stats.step_lower_bound : 0;
  return stats;
}

double fixed_cp_step_lower_bound(std::span<const int64_t> padded_lengths, int dp, int cp,
                                 const CostModel& cost) {
  check(dp >= 1 && cp >= 1, "fixed-CP bound: dp and cp must be >= 1, got ", dp, " and ", cp);
  double total = 0, longest = 0;
  for (const int64_t length : padded_lengths) {
    const double t = cost.time(length, cp);
    total += t;
    longest = std::max(longest, t);
  }
  return std::max(total / dp, longest);
}

double fixed_cp_modeled_step(const Plan& plan, std::span<const int64_t> ids,
                             std::span<const int64_t> padded_lengths, int cp,
                             const CostModel& cost) {
  const detail::LengthById length_of(ids, padded_lengths);
  double slowest = 0;
  for (int r = 0; r < plan.dp(); ++r) {
    double t = 0;
    for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
      for (const int64_t id : plan.pack(k, r)) {
        const int64_t length = length_of(id);
        check(length >= 0, "plan: sample ", id, " is not in the input");
        t += cost.time(length, cp);
      }
    }
    slowest = std::max(slowest, t);
  }
  return slowest;
}

}  // namespace thdpack
