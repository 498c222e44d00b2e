// The balanced scheduler on inputs large enough (>= 2^16 items) that its K search starts where the
// best-fit-decreasing packs can be dealt out: plans stay valid, K stays between the bound and that
// K, and the step cost is never above dp_balanced's, nor above plain LPT over first-fit packs.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>
#include <random>
#include <vector>

#include "thdpack/core/errors.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/data/workloads.hpp"
#include "thdpack/packing/packed_batch.hpp"

#include "thdpack/packing/bin_packing.hpp"
#include "thdpack/schedule/plan_stats.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {
namespace {

constexpr int64_t kCapacity = 32768;
constexpr int64_t kItems = int64_t{1} << 16;

// Long RL rollouts clipped at the cap: the L2 bound is often out of reach of any packing.
std::vector<int64_t> clipped_lengths(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> len(std::log(16000.0), 0.9);
  std::vector<int64_t> out(static_cast<size_t>(kItems));
  for (int64_t& l : out) {
    l = std::clamp<int64_t>(static_cast<int64_t>(std::llround(len(rng))), 1, kCapacity);
  }
  return out;
}

TEST(BalancedLargeInput, ValidPlansBetweenTheBoundAndTheDealtOutK) {
  int jumped = 0;
  for (uint64_t seed = 0; seed < 3; ++seed) {
    for (int dp : {8, 256}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " dp " + std::to_string(dp));
      const std::vector<int64_t> lengths = clipped_lengths(seed);
      std::vector<int64_t> ids(lengths.size());
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
      const ScheduleInput input{ids, lengths, {}, {}};
      ScheduleOptions options;
      options.dp = dp;
      options.max_seqlen_per_dp_cp_rank = kCapacity;
      options.cost = CostModel::from_coefficients(24576, 1);
      const Plan plan = make_scheduler("balanced")->schedule(input, options);
      validate_plan(plan, input, options);
      const int64_t bound = (bins_lower_bound_l2(lengths, kCapacity) + dp - 1) / dp;
      const int64_t dealt = (best_fit_decreasing(lengths, kCapacity).count() + dp - 1) / dp;
      if (dealt > bound) ++jumped;
      EXPECT_GE(plan.num_microbatches(), bound);
      EXPECT_LE(plan.num_microbatches(), std::max(bound + 1, dealt));
      const Plan other = make_scheduler("dp_balanced")->schedule(input, options);
      EXPECT_LE(evaluate_plan(plan, input, {}, options).step_cost,
                evaluate_plan(other, input, {}, options).step_cost * (1 + 1e-9));
    }
  }
  // The inputs do exercise the jump past the bound.
  EXPECT_GT(jumped, 0);
}

// The slowest replica of plain LPT over first-fit-decreasing packs: packs with the most samples
// are split until dp divides the count, then packs by decreasing cost go to the least loaded
// replica that has fewer than count/dp.
double lpt_over_first_fit_packs(const std::vector<int64_t>& lengths, int dp,
                                const CostModel& cost) {
  const Bins bins = first_fit_decreasing(lengths, kCapacity);
  std::vector<std::vector<int64_t>> packs;
  for (int64_t p = 0; p < bins.count(); ++p)
    packs.emplace_back(bins.bin(p).begin(), bins.bin(p).end());
  while (packs.size() % static_cast<size_t>(dp) != 0) {
    auto most = std::max_element(packs.begin(), packs.end(),
                                 [](const auto& a, const auto& b) { return a.size() < b.size(); });
    const int64_t item = most->back();
    most->pop_back();
    packs.push_back({item});
  }
  std::vector<double> pack_cost;
  for (const auto& pack : packs) {
    double c = 0;
    for (int64_t i : pack) c += cost.cost(lengths[static_cast<size_t>(i)]);
    pack_cost.push_back(c);
  }
  std::sort(pack_cost.begin(), pack_cost.end(), std::greater<>());
  const size_t k = packs.size() / static_cast<size_t>(dp);
  using Replica = std::pair<double, int>;  // (load, index), least loaded first
  std::priority_queue<Replica, std::vector<Replica>, std::greater<>> open;
  for (int r = 0; r < dp; ++r) open.emplace(0.0, r);
  std::vector<size_t> taken(static_cast<size_t>(dp), 0);
  double slowest = 0;
  for (double c : pack_cost) {
    auto [load, r] = open.top();
    open.pop();
    load += c;
    slowest = std::max(slowest, load);
    if (++taken[static_cast<size_t>(r)] < k) open.emplace(load, r);
  }
  return slowest;
}

// Where placement item by item fails at the first K and the best-fit-decreasing packs are dealt
// out whole, refinement carries the plan below plain LPT over first-fit packs (it used to stop
// at 1.0001 of the bound: 1.000038 against 1.000035 on the first input here).
TEST(BalancedLargeInput, DealtOutPacksEndNoWorseThanLptOverFirstFitPacks) {
  for (uint64_t seed : {1, 2}) {
    SCOPED_TRACE("bimodal-16k seed " + std::to_string(seed));
    Workload w = workload("bimodal-16k");
    const int64_t n = 4 * kItems;
    w.dataset.size = std::max(n, w.dataset.size);
    w.dataset.seed = seed;
    const auto dataset = make_mock_dataset(w.dataset);
    const int64_t divisor = padding_divisor({.cp = w.cp});
    std::vector<int64_t> lengths(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t padded = (dataset->length(i) + divisor - 1) / divisor * divisor;
      lengths[static_cast<size_t>(i)] = std::min(padded, kCapacity);
    }
    std::vector<int64_t> ids(lengths.size());
    std::iota(ids.begin(), ids.end(), int64_t{0});
    const ScheduleInput input{ids, lengths, {}, {}};
    ScheduleOptions options;
    options.dp = 64;
    options.max_seqlen_per_dp_cp_rank = kCapacity;
    options.cost = CostModel::from_coefficients(24576, 1);
    const Plan plan = make_scheduler("balanced")->schedule(input, options);
    validate_plan(plan, input, options);
    EXPECT_LE(evaluate_plan(plan, input, {}, options).step_cost,
              lpt_over_first_fit_packs(lengths, options.dp, options.cost));
  }
}

// The same rule over the class, not one input: 600 seeded inputs of several shapes (lognormal of
// three spreads, a clipped tail, uniform, few distinct lengths) and sizes, placed item by item or
// dealt out, are never slower than plain LPT over first-fit packs. (Seed 496, placed item by item,
// ended at 1.0001047 of the bound against 1.0000773 while refinement stopped at a fixed target.)
TEST(BalancedLargeInput, NeverSlowerThanLptOverFirstFitPacksOverSeededInputs) {
  int cases = 0;
  for (uint64_t seed = 0; seed < 600; ++seed) {
    std::mt19937_64 rng(seed * 7919 + 11);
    const int64_t n = seed % 3 == 0 ? 2048 : (seed % 3 == 1 ? 8192 : 24576);
    const int dp = seed % 4 == 0 ? 8 : (seed % 4 == 1 ? 16 : (seed % 4 == 2 ? 64 : 128));
    std::vector<int64_t> lengths(static_cast<size_t>(n));
    const int shape = static_cast<int>(seed % 6);
    std::lognormal_distribution<double> narrow(std::log(6000.0), 0.4), wide(std::log(2000.0), 1.2),
        clipped(std::log(16000.0), 0.9);
    std::uniform_int_distribution<int64_t> uniform(1, kCapacity), pick(0, 3);
    const int64_t few[] = {kCapacity, kCapacity / 2, kCapacity / 4, 3000};
    for (int64_t& l : lengths) {
      const double x = shape == 0 ? narrow(rng) : shape == 1 ? wide(rng) : clipped(rng);
      l = shape == 3   ? uniform(rng)
          : shape == 4 ? few[pick(rng)]
                       : std::clamp<int64_t>(static_cast<int64_t>(std::llround(x)), 1, kCapacity);
    }
    SCOPED_TRACE("seed " + std::to_string(seed) + " n " + std::to_string(n) + " dp " +
                 std::to_string(dp) + " shape " + std::to_string(shape));
    std::vector<int64_t> ids(lengths.size());
    std::iota(ids.begin(), ids.end(), int64_t{0});
    const ScheduleInput input{ids, lengths, {}, {}};
    ScheduleOptions options;
    options.dp = dp;
    options.max_seqlen_per_dp_cp_rank = kCapacity;
    options.cost = CostModel::from_coefficients(24576, 1);
    Plan plan;
    try {
      plan = make_scheduler("balanced")->schedule(input, options);
    } catch (const InvalidArgument&) {
      continue;  // too few samples for dp replicas at the bound: no plan to compare
    }
    ++cases;
    EXPECT_LE(evaluate_plan(plan, input, {}, options).step_cost,
              lpt_over_first_fit_packs(lengths, options.dp, options.cost));
  }
  EXPECT_GT(cases, 500);
}

}  // namespace
}  // namespace thdpack
