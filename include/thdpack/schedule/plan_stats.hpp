#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// What a plan costs: micro-batches, fill, padding, modeled step time against lower bounds,
// imbalance across DP replicas, cap violations and FLOPs sums (BENCHMARKS.md figures 1 and 2).
//
// Modeled step time: DP replica r runs its micro-batches one after another; the cost of a
// micro-batch is the sum of the costs of its samples (attention never crosses samples), split
// evenly over the cp ranks of the replica (zigzag CP balances causal attention). With pp > 1 the
// 1F1B bubble adds (pp-1)/pp of the replica's largest micro-batch. The step takes as long as the
// slowest replica. All step figures are per GPU: replica cost / cp.

#include <cstdint>
#include <span>
#include <vector>

#include "thdpack/schedule/cost_model.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {

struct PlanStats {
  int64_t num_samples = 0;
  int64_t num_microbatches = 0;        ///< K, per replica
  int64_t num_groups = 0;              ///< CP groups over all micro-batches (fixed CP: K·dp)
  int64_t microbatch_token_bound = 0;  ///< ceil(padded tokens / (dp·C)), rounded up to the multiple
  int64_t microbatch_lower_bound = 0;  ///< ceil(L2 / dp), rounded up to the multiple (>= the above)
  int64_t real_tokens = 0;
  int64_t padded_tokens = 0;
  double fill = 0;              ///< real tokens / (dp·K·C): share of the static allocation used
  double padding_fraction = 0;  ///< (padded - real) / padded tokens
  double step_cost = 0;         ///< modeled step time (cost units per GPU)
  double step_lower_bound = 0;  ///< max(total/dp, largest sample) / cp
  double step_tight_bound = 0;  ///< >= step_lower_bound; adds pigeonhole bounds (see .cpp)
  double step_ratio = 0;        ///< step_cost / step_lower_bound
  double imbalance = 0;         ///< max / mean of replica step times
  int64_t cap_violations = 0;   ///< packs with more than C padded tokens (must be 0)
  LengthSums sums;              ///< S1, S2 of the global batch, real and padded
  std::vector<double> replica_step_costs;  ///< per replica, per GPU
};

/// Statistics of `plan` for `input`. `real_lengths` (same order as input.ids) may be empty, in
/// which case padded lengths stand in for real ones. Throws InvalidArgument if the plan names an id
/// that is not in the input.
PlanStats evaluate_plan(const Plan& plan, const ScheduleInput& input,
                        std::span<const int64_t> real_lengths, const ScheduleOptions& options);

/// Throws InternalError naming the first violated scheduler contract (scheduler.hpp): a sample
/// missing, duplicated or unknown, an empty pack, a pack over capacity, a K that is not a multiple
/// of options.microbatch_multiple, a group that fits one pack split across packs, a larger group
/// split across replicas or over micro-batches that are not consecutive.
void validate_plan(const Plan& plan, const ScheduleInput& input, const ScheduleOptions& options);

/// max(Σ costs / dp, max cost): the simple lower bound on the slowest replica's cost.
double step_cost_lower_bound(std::span<const double> costs, int dp);

/// A tighter bound: also, for every j >= 1, one replica gets at least j+1 of the j·dp+1 most costly
/// samples, so it costs at least the sum of the j+1 cheapest of those.
double step_cost_tight_bound(std::span<const double> costs, int dp);

}  // namespace thdpack
