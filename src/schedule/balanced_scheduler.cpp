// "balanced": workload-aware scheduling (SPEC §5, ours).
//
// Goal: the smallest modeled step time (the slowest replica's summed sample cost), with every pack
// within capacity, the same micro-batch count K on every replica (a multiple of the VPP group), and
// K within one of the bin-packing lower bound. Replica cost is the sum of its samples' costs
// however they are grouped into packs, so the problem is a cost partition over replicas under a
// packing feasibility constraint:
//   1. K starts at ceil(L2 / dp) (Martello–Toth bound), rounded up to the multiple.
//   2. Longest-processing-time: samples by decreasing cost go to the least loaded replica that has
//      room in one of its K packs (worst fit first; best fit, then a global best-fit-decreasing
//      packing dealt out by count-capped LPT, when room is tight).
//   3. Empty packs are filled, then moves and swaps between the most loaded replica and lighter
//   ones
//      bring the maximum down toward the lower bound.
//   4. If the result is more than 0.2% above the bound, K + multiple is tried too; the better wins.

#include "schedule/schedulers.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>

#include "packing/sorted_items.hpp"
#include "schedule/balanced_assignment.hpp"
#include "schedule/schedule_items.hpp"
#include "schedule/step_bounds.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/bin_packing.hpp"

namespace thdpack::detail {
namespace {

// Accept the first feasible K when its cost is this close to the lower bound.
constexpr double kGoodEnough = 1.002;
// Refinement stops this close to the lower bound: closer is below any modeling accuracy.
constexpr double kRefineTarget = 1.0001;
// Refinement steps per replica.
constexpr int64_t kRefineStepsPerReplica = 64;

struct Candidate {
  double cost = 0;
  PackLists packs;
};

std::optional<Candidate> try_k(const ScheduleItems& items, std::span<const int64_t> order,
                               const ScheduleOptions& options, int64_t k, double bound) {
  using Fit = BalancedAssignment::Fit;
  const int64_t capacity = options.capacity();
  auto finish = [&](BalancedAssignment& a) -> std::optional<Candidate> {
    if (!a.fill_empty_packs()) return std::nullopt;
    a.refine(order, bound * kRefineTarget, kRefineStepsPerReplica * options.dp);
    return Candidate{a.step_cost(options.pp), a.packs()};
  };
  for (Fit fit : {Fit::kWorst, Fit::kBest}) {
    BalancedAssignment a(items, options.dp, k, capacity);
    if (a.place_longest_first(order, fit)) return finish(a);
  }
  BalancedAssignment a(items, options.dp, k, capacity);
  if (a.place_packs(best_fit_decreasing(items.lengths, capacity))) return finish(a);
  return std::nullopt;
}

}  // namespace

std::string BalancedScheduler::description() const {
  return "workload-aware: minimises the slowest replica's modeled cost under the token cap, with "
         "equal micro-batch counts within one of the lower bound";
}

Plan BalancedScheduler::schedule(const ScheduleInput& input, const ScheduleOptions& options) const {
  validate_schedule_input(input, options);
  const ScheduleItems items = build_items(input, options, /*same_rank_groups=*/false);
  const int64_t capacity = options.capacity();
  const int64_t multiple = options.microbatch_multiple;
  const int dp = options.dp;

  // Decreasing cost, ties by index. Without groups cost is non-decreasing in length, so the
  // counting sort by length gives the same order (and the L2 bound for free).
  std::vector<int64_t> order;
  int64_t l2 = 0;
  if (items.grouped) {
    order.resize(static_cast<size_t>(items.size()));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return items.costs[static_cast<size_t>(a)] > items.costs[static_cast<size_t>(b)];
    });
    l2 = bins_lower_bound_l2(items.lengths, capacity);
  } else {
    SortedItems sorted = sort_decreasing(items.lengths, capacity);
    l2 = l2_bound_of_descending(sorted.lengths, capacity);
    order = std::move(sorted.order);
  }
  std::vector<double> descending(order.size());
  for (size_t i = 0; i < order.size(); ++i)
    descending[i] = items.costs[static_cast<size_t>(order[i])];
  const double bound = tight_bound_of_sorted(descending, dp);

  const int64_t k_low = std::max(round_up_to((l2 + dp - 1) / dp, multiple), multiple);
  const int64_t k_high = items.size() / dp / multiple * multiple;
  if (k_low > k_high) {
    throw InvalidArgument(
        "balanced: " + std::to_string(items.size()) + (items.grouped ? " groups" : " samples") +
        " cannot fill dp=" + std::to_string(dp) + " replicas with " + std::to_string(k_low) +
        " non-empty micro-batches each (capacity " + std::to_string(capacity) + " needs at least " +
        std::to_string(l2) +
        " packs); use a larger global batch or a larger max_seqlen_per_dp_cp_rank");
  }

  std::optional<Candidate> best;
  std::optional<int64_t> first_feasible;
  for (int64_t k = k_low; k <= k_high; k += multiple) {
    if (first_feasible && k > *first_feasible + multiple) break;
    auto candidate = try_k(items, order, options, k, bound);
    if (!candidate) continue;
    if (!first_feasible) first_feasible = k;
    if (!best || candidate->cost < best->cost) best = std::move(candidate);
    if (best->cost <= bound * kGoodEnough && options.pp == 1) break;
  }
  if (!best) {
    throw InvalidArgument("balanced: no feasible plan for " + std::to_string(items.size()) +
                          " items over dp=" + std::to_string(dp) + " with capacity " +
                          std::to_string(capacity) + "; use a larger global batch");
  }
  return plan_from_packs(dp, best->packs, items, input);
}

}  // namespace thdpack::detail
