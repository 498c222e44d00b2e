// The modeled step a scheduler reports beside its plan (src/schedule/dynamic_cp_step.hpp):
// default_dynamic_cp_scored gives schedule_default_dynamic_cp's plan, and its step equals
// modeled_step's bit for bit (rounds summed as they are laid out, the whole-group fallback
// included), or no step where a VPP split regrouped the micro-batches; lower_bound of samples
// grouped by length is evaluate_dynamic_cp_plan's.

#include "schedule/dynamic_cp_step.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/flops.hpp"

namespace thdpack::detail {
namespace {

TEST(DefaultDynamicCpScored, StepIsThePlansModeledStepExactly) {
  const CostModel full = CostModel::from_model(model_preset("llama3-8b"), kDefaultGpuTflops, 2,
                                               kDefaultCpLinkGBps, kDefaultCpStepOverheadUs);
  int with_step = 0;
  int without_step = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    std::mt19937_64 rng(seed);
    ScheduleOptions o;
    o.cost = CostModel::megatron_workload();
    o.dp = std::vector<int>{1, 2, 3, 5, 6, 8}[rng() % 6];  // 3, 5, 6: the whole-group fallback
    o.cp = std::vector<int>{1, 2, 4}[rng() % 3];
    o.microbatch_multiple = std::vector<int>{1, 1, 1, 2}[rng() % 4];
    o.max_seqlen_per_dp_cp_rank = 256;
    o.cost = seed % 2 ? full : CostModel::megatron_workload();
    int widest = 1;
    while (widest * 2 <= o.ranks()) widest *= 2;
    const size_t n = 1 + rng() % 400;
    std::lognormal_distribution<double> dist(std::log(100.0), 1.3);
    std::vector<int64_t> lengths(n);
    for (auto& len : lengths) {
      len = std::clamp<int64_t>(static_cast<int64_t>(dist(rng)), 1, 256 * widest);
    }
    std::vector<int64_t> ids(n);
    std::iota(ids.begin(), ids.end(), int64_t{0});
    std::shuffle(ids.begin(), ids.end(), rng);
    SCOPED_TRACE("seed " + std::to_string(seed));
    Plan expected;
    try {
      expected = schedule_default_dynamic_cp(ids, lengths, o);
    } catch (const InvalidArgument&) {
      EXPECT_THROW(default_dynamic_cp_scored(group_by_length(ids, lengths), o, &o.cost),
                   InvalidArgument);
      continue;
    }
    const ScoredPlan scored = default_dynamic_cp_scored(group_by_length(ids, lengths), o, &o.cost);
    ASSERT_EQ(scored.plan, expected);
    if (!scored.step) {
      ++without_step;
      continue;
    }
    ++with_step;
    EXPECT_EQ(*scored.step, modeled_step(expected, LengthById(ids, lengths), o.cost));
    EXPECT_FALSE(default_dynamic_cp_scored(group_by_length(ids, lengths), o, nullptr).step);
  }
  EXPECT_GT(with_step, 150);
  EXPECT_GT(without_step, 5);
}

TEST(LowerBound, OfSamplesGroupedByLengthIsEvaluateDynamicCpPlansToRounding) {
  const CostModel full = CostModel::from_model(model_preset("llama3-8b"), kDefaultGpuTflops, 2,
                                               kDefaultCpLinkGBps, kDefaultCpStepOverheadUs);
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::mt19937_64 rng(seed);
    ScheduleOptions o;
    o.cost = CostModel::megatron_workload();
    o.dp = std::vector<int>{1, 2, 3, 5, 8, 64}[rng() % 6];
    o.cp = std::vector<int>{1, 2, 4}[rng() % 3];
    o.min_cp = seed % 5 == 0 ? 2 : 1;
    o.max_seqlen_per_dp_cp_rank = 256;
    const CostModel cost = seed % 2 ? full : CostModel::megatron_workload();
    const size_t n = 1 + rng() % 300;
    std::lognormal_distribution<double> dist(std::log(100.0), 1.3);
    std::vector<int64_t> lengths(n);
    for (auto& len : lengths) {
      len = std::clamp<int64_t>(static_cast<int64_t>(dist(rng)), 1, 256 * o.ranks());
    }
    std::vector<int64_t> ids(n);
    std::iota(ids.begin(), ids.end(), 0);
    const double expected =
        evaluate_dynamic_cp_plan(Plan(o.dp, o.cp), ids, lengths, o, cost).step_lower_bound;
    EXPECT_NEAR(lower_bound(group_by_length(ids, lengths), o, cost), expected, 1e-12 * expected)
        << "seed " << seed;
  }
}

}  // namespace
}  // namespace thdpack::detail
