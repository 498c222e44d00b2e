// The balanced scheduler on inputs large enough (>= 2^16 items) that its K search starts where the
// best-fit-decreasing packs can be dealt out: plans stay valid, K stays between the bound and that
// K, and the step cost is never above dp_balanced's.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

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

}  // namespace
}  // namespace thdpack
