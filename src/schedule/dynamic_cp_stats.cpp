// Modeled step time and lower bound of a dynamic-CP plan (definitions in dynamic_cp.hpp).

#include <algorithm>
#include <string>
#include <unordered_map>

#include "schedule/dynamic_cp_sizes.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"

namespace thdpack {

DynamicCpStats evaluate_dynamic_cp_plan(const DynamicCpPlan& plan, std::span<const int64_t> ids,
                                        std::span<const int64_t> padded_lengths,
                                        const DynamicCpOptions& options, const CpCostModel& cost) {
  std::unordered_map<int64_t, int64_t> length_of;
  length_of.reserve(ids.size());
  double area = 0;
  double longest = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    length_of.emplace(ids[i], padded_lengths[i]);
    const auto sizes = detail::candidate_cp_sizes(padded_lengths[i], options);
    if (sizes.empty()) {
      throw InvalidArgument("sample " + std::to_string(ids[i]) + " needs more than dp*cp ranks");
    }
    double best_time = cost.time(padded_lengths[i], sizes.front());
    for (const int c : sizes) best_time = std::min(best_time, cost.time(padded_lengths[i], c));
    const int c = detail::least_area_cp_size(padded_lengths[i], sizes, cost);
    area += cost.area(padded_lengths[i], c);
    longest = std::max(longest, best_time);
  }
  DynamicCpStats stats;
  stats.lower_bound = std::max(area / options.ranks(), longest);
  stats.microbatches = plan.num_microbatches();
  for (const auto& mb : plan.microbatches) {
    double slowest = 0;
    for (const auto& g : mb.groups) {
      double t = 0;
      for (const int64_t id : g.ids) t += cost.time(length_of.at(id), g.size);
      slowest = std::max(slowest, t);
    }
    stats.step += slowest;
    stats.groups += static_cast<int64_t>(mb.groups.size());
  }
  return stats;
}

double fixed_cp_modeled_step(const Plan& plan, std::span<const int64_t> ids,
                             std::span<const int64_t> padded_lengths, int cp,
                             const CpCostModel& cost) {
  std::unordered_map<int64_t, int64_t> length_of;
  length_of.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) length_of.emplace(ids[i], padded_lengths[i]);
  double slowest = 0;
  for (int r = 0; r < plan.dp(); ++r) {
    double t = 0;
    for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
      for (const int64_t id : plan.pack(k, r)) t += cost.time(length_of.at(id), cp);
    }
    slowest = std::max(slowest, t);
  }
  return slowest;
}

}  // namespace thdpack
