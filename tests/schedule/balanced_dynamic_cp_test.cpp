// balanced_dynamic_cp: the dynamic-CP contracts over 10,000 random cases, under Megatron's L²/c
// and under the full CP cost model, and its plans against default_dynamic_cp and the bound.

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>

#include "schedule/dynamic_cp_template.hpp"
#include "schedule/length_order.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/data/workloads.hpp"
#include "thdpack/packing/cp_partition.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"

namespace thdpack {
namespace {

CostModel full_cost() {
  return CostModel::from_model(model_preset("llama3-8b"), kDefaultGpuTflops, 2, kDefaultCpLinkGBps,
                               kDefaultCpStepOverheadUs);
}

TEST(CostModel, MegatronWorkloadIsLSquaredOverCp) {
  const CostModel m = CostModel::megatron_workload();
  EXPECT_DOUBLE_EQ(m.time(1000, 1), 1e6);
  EXPECT_DOUBLE_EQ(m.time(1000, 4), 2.5e5);
  EXPECT_DOUBLE_EQ(m.area(1000, 4), 1e6);
}

TEST(CostModel, ExposedCommunicationAndStepOverheadMakeWideGroupsCostlyForShortSamples) {
  const CostModel m = full_cost();
  // No communication on one rank; compute splits evenly.
  const double one = m.time(2048, 1);
  EXPECT_NEAR(one, m.cost(2048) / m.flops_per_second + 20e-6 * 32, 1e-12);
  // A short sample's K/V transfer outlasts its attention: spreading it costs area.
  EXPECT_GT(m.area(2048, 8), 1.2 * m.area(2048, 1));
  // A long sample hides its transfer behind attention: area nearly constant, time halves.
  EXPECT_LT(m.area(131072, 16), 1.01 * m.area(131072, 8));
  EXPECT_NEAR(m.time(131072, 16) / m.time(131072, 8), 0.5, 0.01);
  EXPECT_THROW(CostModel::from_model(model_preset("llama3-8b"), 0, 2, 50, 20), InvalidArgument);
  EXPECT_THROW(CostModel::from_model(model_preset("llama3-8b"), 400, 2, -1, 20), InvalidArgument);
}

TEST(BalancedDynamicCp, PropertiesHoldOverTenThousandRandomCases) {
  std::mt19937_64 rng(777);
  const int dps[] = {1, 2, 3, 4, 5, 6, 8, 16};
  const int cps[] = {1, 2, 4};
  const int multiples[] = {1, 1, 2, 4};
  const CostModel costs[] = {CostModel::megatron_workload(), full_cost()};
  int planned = 0;
  for (int trial = 0; trial < 10000; ++trial) {
    ScheduleOptions o;
    o.cost = CostModel::megatron_workload();
    o.dp = dps[rng() % 8];
    o.cp = cps[rng() % 3];
    o.microbatch_multiple = multiples[rng() % 4];
    o.min_cp = rng() % 8 == 0 ? 2 : 1;
    o.max_seqlen_per_dp_cp_rank = 64 + static_cast<int64_t>(rng() % 4096);
    o.cost = costs[trial % 2];
    int64_t widest = 1;
    while (widest * 2 <= o.ranks()) widest *= 2;
    std::lognormal_distribution<double> dist(
        std::log(static_cast<double>(o.max_seqlen_per_dp_cp_rank) / 2), 1.2);
    const size_t n = 1 + rng() % 48;
    std::vector<int64_t> lengths(n);
    for (auto& len : lengths) {
      len = std::clamp<int64_t>(static_cast<int64_t>(dist(rng)), 1,
                                o.max_seqlen_per_dp_cp_rank * widest);
    }
    std::vector<int64_t> ids(n);
    std::iota(ids.begin(), ids.end(), 100);
    Plan plan;
    try {
      plan = schedule_balanced_dynamic_cp(ids, lengths, o);
    } catch (const InvalidArgument& e) {
      // Only refusal: fewer samples than a VPP multiple of micro-batches needs, or min_cp > G.
      ASSERT_TRUE(o.min_cp > o.ranks() || static_cast<int>(n) < o.microbatch_multiple ||
                  o.microbatch_multiple > 1)
          << "trial " << trial << ": " << e.what();
      continue;
    }
    ASSERT_NO_THROW(check_dynamic_cp_plan(plan, ids, lengths, o)) << "trial " << trial;
    ASSERT_EQ(plan, schedule_balanced_dynamic_cp(ids, lengths, o)) << "trial " << trial;
    const auto stats = evaluate_dynamic_cp_plan(plan, ids, lengths, o, o.cost);
    ASSERT_GE(stats.step_cost, stats.step_lower_bound * (1 - 1e-9)) << "trial " << trial;
    ++planned;
  }
  EXPECT_GT(planned, 9000);
}

// `n` lengths of longctx-128k's shape (lognormal, mean about 8000, σ 1.5, clipped to
// [256, 131072]), padded to 64 = 2·dp·cp.
std::vector<int64_t> long_tail_lengths(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> dist(std::log(8000.0) - 1.125, 1.5);
  std::vector<int64_t> lengths(n);
  for (auto& len : lengths) {
    len = (std::clamp<int64_t>(static_cast<int64_t>(dist(rng)), 256, 131072) + 63) / 64 * 64;
  }
  return lengths;
}

ScheduleOptions dp8_cp4_options(const CostModel& cost) {
  ScheduleOptions o;
  o.cost = CostModel::megatron_workload();
  o.dp = 8;
  o.cp = 4;
  o.max_seqlen_per_dp_cp_rank = 16384;
  o.cost = cost;
  return o;
}

TEST(BalancedDynamicCp, BeatsDefaultDynamicCpOnLongTailsUnderBothCosts) {
  // Lognormal long tail at G = 32: ours is never slower than Megatron's scheduler, under its own
  // L²/c workload or the full model, over 20 seeds.
  for (const CostModel& cost : {CostModel::megatron_workload(), full_cost()}) {
    double ours = 0;
    double megatron = 0;
    for (uint64_t seed = 0; seed < 20; ++seed) {
      const std::vector<int64_t> lengths = long_tail_lengths(seed, 256);
      std::vector<int64_t> ids(lengths.size());
      std::iota(ids.begin(), ids.end(), 0);
      const ScheduleOptions o = dp8_cp4_options(cost);
      ours += evaluate_dynamic_cp_plan(schedule_balanced_dynamic_cp(ids, lengths, o), ids, lengths,
                                       o, cost)
                  .step_cost;
      megatron += evaluate_dynamic_cp_plan(schedule_default_dynamic_cp(ids, lengths, o), ids,
                                           lengths, o, cost)
                      .step_cost;
    }
    EXPECT_LT(ours, megatron);
  }
}

TEST(BalancedDynamicCp, MoreMicrobatchesAreTakenOnlyWhereTheyLowerTheStepEnough) {
  // Under L²/c the modeled step keeps falling, by ever less, towards one sample per micro-batch
  // on all ranks; the K search keeps a larger K only for 0.1% of the step per doubling. On 2,048
  // long-tail samples on 256 ranks it once took 1,267-1,353 micro-batches for a step within
  // 0.07-0.22% of what 27-58 give; now it takes those.
  for (uint64_t seed = 0; seed < 3; ++seed) {
    const std::vector<int64_t> lengths = long_tail_lengths(seed, 2048);
    std::vector<int64_t> ids(lengths.size());
    std::iota(ids.begin(), ids.end(), 0);
    ScheduleOptions o;
    o.cost = CostModel::megatron_workload();
    o.dp = 64;
    o.cp = 4;
    o.max_seqlen_per_dp_cp_rank = 16384;
    const Plan plan = schedule_balanced_dynamic_cp(ids, lengths, o);
    const PlanStats stats = evaluate_dynamic_cp_plan(plan, ids, lengths, o, o.cost);
    EXPECT_LE(plan.num_microbatches(), 128) << "seed " << seed;
    EXPECT_LT(stats.step_cost, 1.01 * stats.step_lower_bound) << "seed " << seed;
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// The dynamic-CP benchmark's full-cost rows (thdpack_dynamic_cp_bench: longctx-128k and rl-64k at
// dp·cp = 32 and 256, 8 samples per rank, 15 seeds, median step over the bound per scheduler):
// Megatron's median over ours, averaged over the four rows, is at least 1.15. Dealing the samples
// a second time by the rank-time their packing gave them took it from 1.147 to 1.151.
TEST(BalancedDynamicCp, IsOnAverageAtLeast1_15xFasterThanDefaultDynamicCpUnderTheFullCost) {
  const CostModel cost = full_cost();
  double speedups = 0;
  int rows = 0;
  for (const char* name : {"longctx-128k", "rl-64k"}) {
    for (const int ranks : {32, 256}) {
      const Workload w = workload(name);
      std::vector<double> ours, megatron;
      for (uint64_t seed = 1000; seed < 1015; ++seed) {
        MockConfig c = w.dataset;
        c.size = 8 * ranks;
        c.seed = seed;
        const auto dataset = make_mock_dataset(c);
        std::vector<int64_t> lengths(static_cast<size_t>(c.size));
        std::vector<int64_t> ids(lengths.size());
        for (size_t i = 0; i < lengths.size(); ++i) {
          lengths[i] = (dataset->length(static_cast<int64_t>(i)) + 2 * ranks - 1) / (2 * ranks) *
                       (2 * ranks);
          ids[i] = static_cast<int64_t>(i);
        }
        ScheduleOptions o;
        o.cost = CostModel::megatron_workload();
        o.dp = ranks;
        o.max_seqlen_per_dp_cp_rank = w.max_seqlen_per_dp_cp_rank;
        o.cost = cost;
        const double bound =
            evaluate_dynamic_cp_plan(Plan(ranks, 1), ids, lengths, o, cost).step_lower_bound;
        ours.push_back(evaluate_dynamic_cp_plan(schedule_balanced_dynamic_cp(ids, lengths, o), ids,
                                                lengths, o, cost)
                           .step_cost /
                       bound);
        megatron.push_back(evaluate_dynamic_cp_plan(schedule_default_dynamic_cp(ids, lengths, o),
                                                    ids, lengths, o, cost)
                               .step_cost /
                           bound);
      }
      speedups += median(megatron) / median(ours);
      ++rows;
    }
  }
  EXPECT_GE(speedups / rows, 1.15);
}

// Large batches where Megatron's plan is more than 0.25% over the bound, so that ours (from a
// template) is made: the plan keeps the contracts, is never slower than Megatron's, and is the
// same on every call.
TEST(BalancedDynamicCp, LargeBatchesAreDeterministicAndNeverSlower) {
  const CostModel megatron_workload_cost = CostModel::megatron_workload();
  const CostModel full = full_cost();
  for (const auto& [cost, n] : {std::pair{std::cref(megatron_workload_cost), size_t{32768}},
                                std::pair{std::cref(full), size_t{8192}}}) {
    const std::vector<int64_t> lengths = long_tail_lengths(9, n);
    std::vector<int64_t> ids(lengths.size());
    std::iota(ids.begin(), ids.end(), 0);
    const ScheduleOptions o = dp8_cp4_options(cost);
    const PlanStats megatron = evaluate_dynamic_cp_plan(
        schedule_default_dynamic_cp(ids, lengths, o), ids, lengths, o, cost);
    ASSERT_GT(megatron.step_cost, 1.0025 * megatron.step_lower_bound) << n << " samples";
    const Plan plan = schedule_balanced_dynamic_cp(ids, lengths, o);
    ASSERT_NO_THROW(check_dynamic_cp_plan(plan, ids, lengths, o));
    EXPECT_EQ(schedule_balanced_dynamic_cp(ids, lengths, o), plan);
    EXPECT_LE(evaluate_dynamic_cp_plan(plan, ids, lengths, o, cost).step_cost, megatron.step_cost);
  }
}

// Megatron's plan is made first; within 0.25% of the lower bound it is returned as it is (no plan
// is faster by more; on a million samples that saves 20-45 ms), though ours would be faster.
// Long-tail samples at G = 32 under L²/c, planned from a template: at 65,536 samples Megatron's
// plan is 1.0016 of the bound and the template's 1.0007, and Megatron's is returned; at 32,768
// Megatron's is 1.0031 (the template's 1.0008), and ours is made and returned.
TEST(BalancedDynamicCp, KeepsMegatronsPlanWhenItIsWithinAQuarterPercentOfTheBound) {
  const ScheduleOptions o = dp8_cp4_options(CostModel::megatron_workload());
  for (const size_t n : {size_t{65536}, size_t{32768}}) {
    SCOPED_TRACE(std::to_string(n) + " samples");
    const std::vector<int64_t> lengths = long_tail_lengths(0, n);
    std::vector<int64_t> ids(lengths.size());
    std::iota(ids.begin(), ids.end(), 0);
    const Plan megatron = schedule_default_dynamic_cp(ids, lengths, o);
    const PlanStats theirs = evaluate_dynamic_cp_plan(megatron, ids, lengths, o, o.cost);
    // Ours, as step 6 makes it (the template of 2,048 samples): faster in both cases.
    const detail::LengthGroups grouped = detail::group_by_length(ids, lengths);
    const auto ours = detail::plan_by_template(
        grouped, o, 2048,
        [](std::span<const int64_t> t_ids, std::span<const int64_t> t_lengths,
           const ScheduleOptions& t_o) {
          return detail::to_draft(schedule_balanced_dynamic_cp(t_ids, t_lengths, t_o));
        });
    ASSERT_TRUE(ours.has_value());
    ASSERT_LT(ours->step(), theirs.step_cost);
    const Plan plan = schedule_balanced_dynamic_cp(ids, lengths, o);
    if (n == 65536) {
      ASSERT_LE(theirs.step_cost, 1.0025 * theirs.step_lower_bound);
      EXPECT_EQ(plan, megatron);
    } else {
      ASSERT_GT(theirs.step_cost, 1.0025 * theirs.step_lower_bound);
      EXPECT_EQ(plan, detail::to_plan(ours->build(grouped), o.dp, o.cp));
    }
  }
}

// Batches of many samples per rank (hundreds of micro-batches): the first micro-batch count that
// packs fills every micro-batch with tokens, and a plan made there was up to 1.97x the bound under
// L²/c (K tried only up to 6 past it); Megatron's greedy is near the bound there. Per seed, under
// both costs, ours is never slower than default_dynamic_cp, and under L²/c it is within 1% of the
// bound (so its own plan, not Megatron's kept by step 5, is the one returned).
// 20,000 samples (625 per rank) are planned from a template of one sample per block of 9 (2,222
// samples, step 6): the same guarantees.
// Where the template does not apply (min_cp not a power of two), a batch of more than 4,096
// samples searches K on a stride sample and plans all samples once at the K found: under L²/c
// that plan (Megatron's is 1.0074 of the bound) is the one returned, keeps the contracts and
// lands within 0.1% of the bound.
TEST(BalancedDynamicCp, ABatchPastTheSampledSearchThresholdWithoutATemplateKeepsTheContracts) {
  const std::vector<int64_t> lengths = long_tail_lengths(7, 8000);
  std::vector<int64_t> ids(lengths.size());
  std::iota(ids.begin(), ids.end(), 0);
  ScheduleOptions o = dp8_cp4_options(CostModel::megatron_workload());
  o.dp = 6;  // G = 24: groups of 3, 6, 12 and 24
  o.min_cp = 3;
  const Plan megatron = schedule_default_dynamic_cp(ids, lengths, o);
  const Plan plan = schedule_balanced_dynamic_cp(ids, lengths, o);
  ASSERT_NO_THROW(check_dynamic_cp_plan(plan, ids, lengths, o));
  EXPECT_NE(plan, megatron);
  const PlanStats ours = evaluate_dynamic_cp_plan(plan, ids, lengths, o, o.cost);
  EXPECT_LT(ours.step_cost, evaluate_dynamic_cp_plan(megatron, ids, lengths, o, o.cost).step_cost);
  EXPECT_LT(ours.step_cost, 1.001 * ours.step_lower_bound);
}

// Where no micro-batch count in a VPP multiple packs but Megatron's VPP split made one, Megatron's
// plan is returned (this threw "cannot fill a multiple of the VPP group": 5 of the first 54
// seeds here).
TEST(BalancedDynamicCp, ReturnsMegatronsPlanWhereNoVppMultipleOfMicrobatchesPacks) {
  int planned = 0;
  for (uint64_t seed : {5, 19, 29, 43, 53}) {
    std::mt19937_64 rng(seed);
    ScheduleOptions o;
    o.cost = CostModel::megatron_workload();
    o.dp = 2;
    o.cp = 2;
    o.min_cp = 3;
    o.microbatch_multiple = 4;
    o.max_seqlen_per_dp_cp_rank = 4096;
    o.cost = full_cost();
    const size_t n = 1 + rng() % 400;
    std::lognormal_distribution<double> dist(std::log(2048.0), 1.2);
    std::vector<int64_t> ids(n);
    std::vector<int64_t> lengths(n);
    std::iota(ids.begin(), ids.end(), 0);
    for (auto& len : lengths) len = std::clamp<int64_t>(static_cast<int64_t>(dist(rng)), 1, 16384);
    const Plan megatron = schedule_default_dynamic_cp(ids, lengths, o);
    Plan plan;
    ASSERT_NO_THROW(plan = schedule_balanced_dynamic_cp(ids, lengths, o)) << "seed " << seed;
    ASSERT_NO_THROW(check_dynamic_cp_plan(plan, ids, lengths, o));
    EXPECT_LE(evaluate_dynamic_cp_plan(plan, ids, lengths, o, o.cost).step_cost,
              evaluate_dynamic_cp_plan(megatron, ids, lengths, o, o.cost).step_cost);
    ++planned;
  }
  EXPECT_EQ(planned, 5);
}

TEST(BalancedDynamicCp, NeverSlowerThanDefaultDynamicCpOnBatchesOfManySamplesPerRank) {
  const CostModel megatron_workload_cost = CostModel::megatron_workload();
  const CostModel full = full_cost();
  for (const CostModel& cost : {std::cref(megatron_workload_cost), std::cref(full)}) {
    const bool megatron_cost = &cost == &megatron_workload_cost;
    for (uint64_t seed = 0; seed < 4; ++seed) {
      SCOPED_TRACE("seed " + std::to_string(seed) + (megatron_cost ? ", L²/c" : ", full"));
      const std::vector<int64_t> lengths = long_tail_lengths(seed, seed < 3 ? 32 * 96 : 20000);
      std::vector<int64_t> ids(lengths.size());
      std::iota(ids.begin(), ids.end(), 0);
      const ScheduleOptions o = dp8_cp4_options(cost);
      const Plan plan = schedule_balanced_dynamic_cp(ids, lengths, o);
      ASSERT_NO_THROW(check_dynamic_cp_plan(plan, ids, lengths, o));
      const PlanStats ours = evaluate_dynamic_cp_plan(plan, ids, lengths, o, cost);
      const PlanStats megatron = evaluate_dynamic_cp_plan(
          schedule_default_dynamic_cp(ids, lengths, o), ids, lengths, o, cost);
      EXPECT_LE(ours.step_cost, megatron.step_cost);  // by construction (step 5)
      if (megatron_cost) {
        // The packing's own plan: within 1% of the bound, so strictly faster than Megatron's
        // (which lands 4-6% above it on these batches).
        EXPECT_LE(ours.step_cost, 1.01 * ours.step_lower_bound);
        EXPECT_LT(ours.step_cost, megatron.step_cost);
      }
    }
  }
}

}  // namespace
}  // namespace thdpack

namespace thdpack {
namespace {

TEST(BalancedDynamicCp, ZigzagWithinEachGroupBalancesCausalWorkAsFixedCpDoes) {
  // longctx-like lengths at G = 32, padded to 2·dp·cp = 64: per-sample zigzag over each group's
  // size keeps causal-attention work within 0.5% across the group's ranks (work-weighted over all
  // groups of all micro-batches, as the fixed-CP figure is).
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> dist(std::log(8000.0) - 1.125, 1.5);
  std::vector<int64_t> real(256), padded(256), ids(256);
  for (size_t i = 0; i < real.size(); ++i) {
    real[i] = std::clamp<int64_t>(static_cast<int64_t>(dist(rng)), 256, 131072);
    padded[i] = (real[i] + 63) / 64 * 64;
    ids[i] = static_cast<int64_t>(i);
  }
  ScheduleOptions o;
  o.cost = CostModel::megatron_workload();
  o.dp = 8;
  o.cp = 4;
  o.max_seqlen_per_dp_cp_rank = 16384;
  o.cost = full_cost();
  const Plan plan = schedule_balanced_dynamic_cp(ids, padded, o);
  double max_sum = 0, mean_sum = 0;
  int multi_rank_groups = 0;
  for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
    for (const CpGroupView g : plan.microbatch(k)) {
      std::vector<int32_t> cu{0}, cu_padded{0};
      for (const int64_t id : g.ids) {
        cu.push_back(cu.back() + static_cast<int32_t>(real[static_cast<size_t>(id)]));
        cu_padded.push_back(cu_padded.back() +
                            static_cast<int32_t>(padded[static_cast<size_t>(id)]));
      }
      const auto work = cp_attention_work(ThdLayout(cu, cu_padded), g.size);
      max_sum += *std::max_element(work.begin(), work.end());
      mean_sum += std::accumulate(work.begin(), work.end(), 0.0) / g.size;
      multi_rank_groups += g.size > 1;
    }
  }
  EXPECT_GT(multi_rank_groups, 0);
  EXPECT_LE(max_sum / mean_sum, 1.005);
}

}  // namespace
}  // namespace thdpack
