// Plan statistics: hand-computed figures, bounds, and the pipeline bubble term.

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/plan_stats.hpp"

namespace thdpack {
namespace {

ScheduleOptions token_cost_options(int dp, int64_t m, int pp = 1, int cp = 1) {
  ScheduleOptions o;
  o.dp = dp;
  o.cp = cp;
  o.pp = pp;
  o.max_seqlen_per_dp_cp_rank = m;
  o.cost = CostModel{1.0, 0.0};  // cost = tokens
  return o;
}

TEST(PlanStats, HandComputedFigures) {
  // dp 2, C 10: replica 0 runs [0,1] then [4]; replica 1 runs [2] then [3].
  const auto in = testing::make_input({4, 6, 8, 2, 3, 3}, 2);
  const Plan plan(2, 1, {{0, 1}, {2}, {4}, {3, 5}});
  const std::vector<int64_t> real = {3, 6, 7, 2, 3, 1};
  const PlanStats s = evaluate_plan(plan, in.view(), real, token_cost_options(2, 10));
  EXPECT_EQ(s.num_samples, 6);
  EXPECT_EQ(s.num_microbatches, 2);
  EXPECT_EQ(s.padded_tokens, 26);
  EXPECT_EQ(s.real_tokens, 22);
  EXPECT_DOUBLE_EQ(s.fill, 22.0 / 40.0);
  EXPECT_DOUBLE_EQ(s.padding_fraction, 4.0 / 26.0);
  EXPECT_DOUBLE_EQ(s.replica_step_costs[0], 13.0);
  EXPECT_DOUBLE_EQ(s.replica_step_costs[1], 13.0);
  EXPECT_DOUBLE_EQ(s.step_cost, 13.0);
  EXPECT_DOUBLE_EQ(s.step_lower_bound, 13.0);
  EXPECT_DOUBLE_EQ(s.imbalance, 1.0);
  EXPECT_EQ(s.cap_violations, 0);
  EXPECT_EQ(s.microbatch_token_bound, 2);  // ceil(26 / 20)
  EXPECT_DOUBLE_EQ(s.sums.s1_real, 22);
  EXPECT_DOUBLE_EQ(s.sums.s2_real, 9 + 36 + 49 + 4 + 9 + 1);
  EXPECT_DOUBLE_EQ(s.sums.s2_padded, 16 + 36 + 64 + 4 + 9 + 9);
}

TEST(PlanStats, CountsCapViolationsAndImbalance) {
  const auto in = testing::make_input({9, 9, 1, 1}, 2);
  const Plan plan(2, 1, {{0, 1}, {2, 3}});
  const PlanStats s = evaluate_plan(plan, in.view(), {}, token_cost_options(2, 10));
  EXPECT_EQ(s.cap_violations, 1);
  EXPECT_DOUBLE_EQ(s.imbalance, 18.0 / 10.0);
  EXPECT_DOUBLE_EQ(s.step_ratio, 18.0 / 10.0);
}

TEST(PlanStats, PipelineBubbleAndContextParallelUnits) {
  // pp 4: replica time = sum + 3/4 of its largest micro-batch; cp 2 halves per-GPU time.
  const auto in = testing::make_input({8, 4, 8, 4}, 2);
  const Plan plan(2, 2, {{0}, {2}, {1}, {3}});
  const PlanStats s = evaluate_plan(plan, in.view(), {}, token_cost_options(2, 8, 4, 2));
  EXPECT_DOUBLE_EQ(s.step_cost, (12.0 + 0.75 * 8.0) / 2.0);
  EXPECT_DOUBLE_EQ(s.step_lower_bound, 12.0 / 2.0);
}

TEST(StepBounds, SimpleAndTightBounds) {
  const std::vector<double> costs = {10, 1, 1, 1};
  EXPECT_DOUBLE_EQ(step_cost_lower_bound(costs, 2), 10.0);
  // Three equal costs on two replicas: one replica gets two of them.
  const std::vector<double> equal = {5, 5, 5};
  EXPECT_DOUBLE_EQ(step_cost_lower_bound(equal, 2), 7.5);
  EXPECT_DOUBLE_EQ(step_cost_tight_bound(equal, 2), 10.0);
  // dp 3, costs 9 8 7 6 1: one replica gets two of the top four -> at least 7 + 6.
  const std::vector<double> five = {1, 6, 9, 7, 8};
  EXPECT_DOUBLE_EQ(step_cost_tight_bound(five, 3), 13.0);
  EXPECT_GE(step_cost_tight_bound(five, 3), step_cost_lower_bound(five, 3));
}

TEST(PlanStats, UnknownIdIsAnError) {
  const auto in = testing::make_input({1, 1}, 1);
  test_util::expect_throw_with<InvalidArgument>(
      [&] {
        evaluate_plan(Plan(1, 1, {{0, 5}}), in.view(), {}, token_cost_options(1, 10));
      },
      "5");
}

}  // namespace
}  // namespace thdpack
