// "balanced": workload-aware scheduling (SPEC §5, ours).
//
// Goal: the smallest modeled step time (the slowest replica's summed sample cost), with every pack
// within capacity, the same micro-batch count K on every replica (a multiple of the VPP group), and
// K within one of the bin-packing lower bound where that bound can be reached. Replica cost is the
// sum of its samples' costs however they are grouped into packs, so the problem is a cost
// partition over replicas under a packing feasibility constraint:
//   1. K starts at ceil(L2 / dp) (Martello–Toth bound), or where the best-fit-decreasing packs can
//      be dealt out if that is more, rounded up to the multiple.
//   2. Longest-processing-time: samples by decreasing cost go to the least loaded replica that has
//      room in one of its K packs (worst fit first; a tight fit, then a global best-fit-decreasing
//      packing dealt out by count-capped LPT, when room is tight).
//   3. Empty packs are filled, then moves and swaps between the most loaded replica and lighter
//      ones bring the maximum down toward the lower bound, within a work budget.
//   4. Below kLargeInput items, no plan is slower than plain LPT over first-fit packs (refinement
//      goes on until below it; that plan itself where none gets there).
//   5. If K fails, K + multiple is tried when the best-fit-decreasing packs fit there, else the K
//      where they can be dealt out; if the result is more than 0.2% above the bound, one K more is
//      tried too and the better wins.
//
// Cost: each attempt is O(n log n) to place without groups (O(log K) per pack choice, O(log dp)
// per replica choice, every replica set aside at most once per item it takes as items come
// longest first; with groups, ordered by cost, set-asides can repeat: O(n·dp log dp) at worst),
// O(moves · (log dp + m + K)) to fill empty packs, and at most kRefineWorkPerItem · n +
// kRefineWorkPerReplica · dp units for refinement; at most four attempts run.

#include "schedule/schedulers.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <string>

#include "packing/sorted_items.hpp"
#include "schedule/balanced_assignment.hpp"
#include "schedule/lpt_baseline.hpp"
#include "schedule/oversize_groups.hpp"
#include "schedule/pack_splitting.hpp"
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
// Packs dealt out whole balance no finer than plain LPT over first-fit packs, and can come out a
// few 1e-6 above it; refinement of a dealt-out plan goes on to this much closer target, so that
// it ends below that baseline.
constexpr double kDealtRefineTarget = 1.00001;
// Refinement budget: at most this many transfers per replica, and this much work (items examined
// or moved) per item and per replica, so that refinement costs O(n + dp) whatever the input.
constexpr int64_t kRefineTransfersPerReplica = 64;
constexpr int64_t kRefineWorkPerItem = 16;
constexpr int64_t kRefineWorkPerReplica = 1024;

struct Candidate {
  double cost = 0;
  PackLists packs;
};

// Whether try_k may fall back to dealing out the best-fit-decreasing packs.
enum class Fallback { kDealPacks, kNone };
// Whether try_k starts with worst fit or (on large inputs, where a failed worst-fit pass costs tens
// of milliseconds) with the tight fit.
enum class FirstFit { kWorst, kTight };

// From this many items on, one placement pass costs tens of milliseconds, so placement avoids
// passes that may not succeed: it skips worst fit (which spreads tokens over the packs and, with K
// only just enough, often failed after a full pass on large inputs, where the tight fit placed
// them at the same quality)...
constexpr int64_t kLargeInput = int64_t{1} << 16;
// ... unless the packs would be at most this full: then worst fit has ample room (it fails only on
// fuller packs), and the tight fit would leave packs empty (with few packs per replica, first fit
// puts a replica's short items all into its first pack, and refilling the others is costly on
// many samples over many replicas).
constexpr double kWorstFitMaxFill = 0.85;
// Refinement stops after this much work whatever the input size, so a million items are not
// refined for seconds after the plan is within a few 1e-4 of the bound.
constexpr int64_t kRefineWorkCap = int64_t{1} << 22;

// One K: longest-first placement (worst fit, then the tight fit), else (kDealPacks) the global
// best-fit-decreasing packing `bfd` dealt out by count; then empty packs filled and refinement,
// which goes on past its target while the slowest replica is above `ceiling`.
// `ranked` holds the items by rank (see BalancedAssignment); `original` maps a rank back.
std::optional<Candidate> try_k(const ScheduleItems& ranked, std::span<const int64_t> original,
                               const ScheduleOptions& options, int64_t k, double bound,
                               double ceiling, const std::function<const Bins&()>& bfd,
                               Fallback fallback, FirstFit first_fit) {
  using Fit = BalancedAssignment::Fit;
  const int64_t capacity = options.capacity();
  auto finish = [&](BalancedAssignment& a, double target) -> std::optional<Candidate> {
    if (!a.fill_empty_packs()) return std::nullopt;
    a.refine(std::min(bound * target, ceiling),
             {kRefineTransfersPerReplica * options.dp,
              std::min(kRefineWorkCap,
                       kRefineWorkPerItem * ranked.size() + kRefineWorkPerReplica * options.dp)});
    return Candidate{a.step_cost(options.pp), a.packs(original)};
  };
  for (Fit fit : {Fit::kWorst, Fit::kTight}) {
    if (fit == Fit::kWorst && first_fit == FirstFit::kTight) continue;
    BalancedAssignment a(ranked, options.dp, k, capacity);
    if (a.place_longest_first(fit)) return finish(a, kRefineTarget);
  }
  if (fallback == Fallback::kNone) return std::nullopt;
  BalancedAssignment a(ranked, options.dp, k, capacity);
  if (a.place_packs(bfd())) return finish(a, kDealtRefineTarget);
  return std::nullopt;
}

// The items (samples, or groups) in decreasing cost, ties by index, renumbered by that rank:
// placement then reads lengths and costs front to back instead of at random (at a million items,
// cache misses were most of its time).
struct Ranking {
  bool grouped = false;
  ScheduleItems items;         ///< with groups: each item's samples (lengths and costs dropped)
  std::vector<int64_t> order;  ///< rank -> item
  ScheduleItems ranked;        ///< lengths and costs by rank
  int64_t l2 = 0;              ///< the L2 lower bound on the pack count
};

Ranking rank_items(const ScheduleInput& input, const ScheduleOptions& options) {
  Ranking r;
  // Without groups every sample is its own item and nothing but the samples' lengths is needed
  // (the per-item tables of build_items are skipped: at a million samples, 40 MB of fresh pages).
  r.grouped = !input.group_ids.empty();
  const int64_t capacity = options.capacity();
  if (r.grouped) {
    r.items = build_items(input, options, /*same_rank_groups=*/false);
    r.order.resize(static_cast<size_t>(r.items.size()));
    std::iota(r.order.begin(), r.order.end(), int64_t{0});
    std::stable_sort(r.order.begin(), r.order.end(), [&](int64_t a, int64_t b) {
      return r.items.costs[static_cast<size_t>(a)] > r.items.costs[static_cast<size_t>(b)];
    });
    r.l2 = bins_lower_bound_l2(r.items.lengths, capacity);
    r.ranked.lengths.resize(r.order.size());
    r.ranked.costs.resize(r.order.size());
    for (size_t i = 0; i < r.order.size(); ++i) {
      r.ranked.lengths[i] = r.items.lengths[static_cast<size_t>(r.order[i])];
      r.ranked.costs[i] = r.items.costs[static_cast<size_t>(r.order[i])];
    }
  } else {
    check_items_fit(input.padded_lengths, capacity, "sample");
    // Cost is non-decreasing in length, so the counting sort by length gives the same order (and
    // the L2 bound for free).
    SortedItems sorted = sort_decreasing(input.padded_lengths, capacity);
    r.l2 = l2_bound_of_descending(sorted.lengths, capacity);
    r.order = std::move(sorted.order);
    r.ranked.lengths = std::move(sorted.lengths);
    // A sample's cost is a function of its length: computed in order instead of gathered.
    r.ranked.costs.resize(r.order.size());
    for (size_t i = 0; i < r.order.size(); ++i) {
      r.ranked.costs[i] = options.cost.cost(r.ranked.lengths[i]);
    }
  }
  // Past this point only the samples of each item are read.
  std::vector<int64_t>().swap(r.items.lengths);
  std::vector<double>().swap(r.items.costs);
  return r;
}

// The micro-batch counts smallest_working_k searches: [k_low, k_high] in steps of `multiple`, and
// `dealt`, the K at which the best-fit-decreasing packs can be dealt out over the replicas.
struct KRange {
  int64_t k_low, k_high, multiple, dealt;
};

int64_t dealt_k(int64_t bfd_packs, int dp, int64_t multiple) {
  return round_up_to((bfd_packs + dp - 1) / dp, multiple);
}

using Attempt = std::function<std::optional<Candidate>(int64_t k, Fallback, FirstFit)>;

std::optional<Candidate> smallest_working_k(const KRange& range, const ScheduleItems& ranked,
                                            int dp, int64_t capacity, int pp, double bound,
                                            const Attempt& attempt) {
  // The smallest K that works, from the lower bound up. The bound usually works. When it does not,
  // K + multiple is tried next (the common near miss; longest-first only when the global
  // best-fit-decreasing packs do not fit there, since dealing them out cannot work), then K jumps
  // to ceil(packs / dp), where dealing out those packs works. Three K are tried (where walking up
  // one K at a time cost one attempt per K: seconds at a million samples), plus, in the rare case
  // below, the K up to k_high.
  // The search starts at the K where the best-fit-decreasing packs can be dealt out, if that is
  // above the bound: below it longest-first per replica, which packs no tighter than global best
  // fit, fails after a full pass per fit (all 22 such K among the 200 inputs of 8192 samples x dp
  // 64 in thdpack_planner_bench did). Large inputs start with the tight fit.
  const auto [k_low, k_high, multiple, dealt] = range;
  int64_t first = k_low;
  if (dealt > first && dealt <= k_high) first = dealt;
  int64_t tokens = 0;
  for (int64_t length : ranked.lengths) tokens += length;
  const double fill = static_cast<double>(tokens) / (static_cast<double>(dp) * first * capacity);
  const FirstFit first_fit =
      ranked.size() >= kLargeInput && fill > kWorstFitMaxFill ? FirstFit::kTight : FirstFit::kWorst;
  std::optional<Candidate> best = attempt(first, Fallback::kDealPacks, first_fit);
  if (!best && first + multiple <= k_high) {
    first += multiple;
    best =
        attempt(first, dealt <= first ? Fallback::kDealPacks : Fallback::kNone, FirstFit::kWorst);
    // Dealing out works at `dealt`; later K only if that is wrong about this input. Where `dealt`
    // is past k_high (too few samples for dp·dealt packs), the K up to k_high are tried in turn.
    if (!best) {
      const int64_t start = dealt <= k_high ? std::max(first + multiple, dealt) : first + multiple;
      for (first = start; first <= k_high; first += multiple) {
        best = attempt(first, Fallback::kDealPacks, FirstFit::kWorst);
        if (best) break;
      }
    }
  }
  // One K more can balance better (more, smaller packs); it is kept when it does.
  if (best && !(best->cost <= bound * kGoodEnough && pp == 1) && first + multiple <= k_high) {
    auto candidate = attempt(first + multiple, Fallback::kDealPacks, FirstFit::kWorst);
    if (candidate && candidate->cost < best->cost) best = std::move(candidate);
  }
  return best;
}

}  // namespace

std::string BalancedScheduler::description() const {
  return "workload-aware: minimises the slowest replica's modeled cost under the token cap, with "
         "equal micro-batch counts within one of the lower bound where it can be reached";
}

Plan BalancedScheduler::schedule(const ScheduleInput& input, const ScheduleOptions& options) const {
  validate_schedule_input(input, options);
  if (auto plan = plan_with_oversize_groups(input, options)) return std::move(*plan);
  Ranking r = rank_items(input, options);
  const bool grouped = r.grouped;
  const ScheduleItems& ranked = r.ranked;
  const std::vector<int64_t>& order = r.order;
  const int64_t l2 = r.l2;
  const int64_t capacity = options.capacity();
  const int64_t multiple = options.microbatch_multiple;
  const int dp = options.dp;
  const double bound = tight_bound_of_sorted(ranked.costs, dp);

  const int64_t k_low = std::max(round_up_to((l2 + dp - 1) / dp, multiple), multiple);
  const int64_t k_high = ranked.size() / dp / multiple * multiple;
  check(k_low <= k_high, "balanced: ", ranked.size(), grouped ? " groups" : " samples",
        " cannot fill dp=", dp, " replicas with ", k_low,
        " non-empty micro-batches each (capacity ", capacity, " needs at least ", l2,
        " packs); use a larger global batch or a larger max_seqlen_per_dp_cp_rank");

  // The global best-fit-decreasing packing, computed once if a placement needs it.
  std::optional<Bins> bfd_packs;
  const std::function<const Bins&()> bfd = [&]() -> const Bins& {
    if (!bfd_packs) {
      bfd_packs = grouped ? best_fit_decreasing(ranked.lengths, capacity)
                          : best_fit_decreasing_of_descending(ranked.lengths, capacity);
    }
    return *bfd_packs;
  };
  // Its pack count: on large inputs without the packing, which only a failed placement needs; on
  // small ones the packing itself, cheap there and needed as often as not.
  std::optional<int64_t> bfd_count;
  auto bfd_packs_count = [&]() {
    if (!bfd_count) {
      bfd_count = bfd_packs || grouped || ranked.size() < kLargeInput
                      ? bfd().count()
                      : best_fit_decreasing_count(ranked.lengths, capacity);
    }
    return *bfd_count;
  };
  // Plain LPT over first-fit packs, where its step costs little next to the search (fewer than
  // kLargeInput items): every candidate is refined until it is no slower, and where none gets
  // there the baseline is the plan. (A fixed refinement target alone let 1 in 600 seeded inputs
  // end a few 1e-5 above it.)
  std::optional<Bins> baseline_packs;
  double ceiling = std::numeric_limits<double>::infinity();
  if (ranked.size() < kLargeInput) {
    baseline_packs = split_first_fit_packs(ranked, dp, multiple, capacity);
    if (baseline_packs) ceiling = lpt_step_cost(ranked, *baseline_packs, dp, options.pp);
  }
  const Attempt attempt = [&](int64_t k, Fallback fallback, FirstFit first_fit) {
    return try_k(ranked, order, options, k, bound, ceiling, bfd, fallback, first_fit);
  };

  std::optional<Candidate> best =
      smallest_working_k({k_low, k_high, multiple, dealt_k(bfd_packs_count(), dp, multiple)},
                         ranked, dp, capacity, options.pp, bound, attempt);
  if (baseline_packs && (!best || ceiling < best->cost)) {
    const BalancedAssignment a = lpt_assignment(ranked, *baseline_packs, dp, capacity);
    best = Candidate{a.step_cost(options.pp), a.packs(order)};
  }
  if (!best) {
    fail("balanced: no feasible plan for ", ranked.size(), " items over dp=", dp, " with capacity ",
         capacity, "; use a larger global batch");
  }
  Plan plan = grouped ? plan_from_packs(dp, options.cp, best->packs, r.items, input)
                      : plan_from_sample_packs(dp, options.cp, best->packs, input);
  return cap_sequences_per_pack(std::move(plan), input, options, PackMoves::kAllowed);
}

}  // namespace thdpack::detail
