// Megatron-exact default_dynamic_cp: hand-checked rounds (packing, new groups, leftovers, idle-rank
// doubling, whole-group fallback, VPP split) and a property test over 10,000 random cases.

#include <gtest/gtest.h>

#include <limits>
#include <numeric>
#include <random>

#include "expect_throw.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"

namespace thdpack {
namespace {

ScheduleOptions options(int dp, int cp, int64_t m, int multiple = 1, int min_cp = 1) {
  ScheduleOptions o;
  o.cost = CostModel::megatron_workload();
  o.dp = dp;
  o.cp = cp;
  o.max_seqlen_per_dp_cp_rank = m;
  o.microbatch_multiple = multiple;
  o.min_cp = min_cp;
  return o;
}

std::vector<int64_t> iota_ids(size_t n) {
  std::vector<int64_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

Plan plan_for(const std::vector<int64_t>& lengths, const ScheduleOptions& o) {
  const auto ids = iota_ids(lengths.size());
  Plan plan = schedule_default_dynamic_cp(ids, lengths, o);
  check_dynamic_cp_plan(plan, ids, lengths, o);
  return plan;
}

std::vector<CpGroup> microbatch(std::vector<CpGroup> groups) {
  return groups;
}

TEST(DynamicCp, CpMinIsTheSmallestPowerOfTwoThatKeepsEachRankWithinM) {
  EXPECT_EQ(cp_min_for_length(1, 100, 1), 1);
  EXPECT_EQ(cp_min_for_length(100, 100, 1), 1);
  EXPECT_EQ(cp_min_for_length(101, 100, 1), 2);
  EXPECT_EQ(cp_min_for_length(200, 100, 1), 2);
  EXPECT_EQ(cp_min_for_length(201, 100, 1), 4);
  EXPECT_EQ(cp_min_for_length(131072, 16384, 1), 8);
  EXPECT_EQ(cp_min_for_length(50, 100, 3), 3);
  EXPECT_EQ(cp_min_for_length(300, 100, 2), 4);
}

TEST(DefaultDynamicCp, ShortSamplesTakeNewSingleRankGroupsAndPackWhereTheMaximumStays) {
  // G = 4, M = 100. 150 needs cp 2 -> ranks [0,2), load 11250, cap 15750. 100 -> a new group of 1
  // (tie with a new group of 2: the first candidate wins). 50 -> a new group of 1 (adding to the
  // cp-2 group raises the maximum to 12500). The last 50 joins that group: the maximum stays.
  const auto plan = plan_for({150, 100, 50, 50}, options(2, 2, 100));
  ASSERT_EQ(plan.num_microbatches(), 1);
  EXPECT_EQ(plan.microbatch(0).groups(), microbatch({{0, 2, {0}}, {2, 1, {1}}, {3, 1, {2, 3}}}));
  EXPECT_EQ(plan.microbatch(0).group_of(1).size, 2);
  EXPECT_EQ(plan.microbatch(0).groups()[2].ids, (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(plan.microbatch(0).group_of(3).holds(3));
}

TEST(DefaultDynamicCp, IdleRanksDoubleTheFirstSmallestGroup) {
  // [0] and [1] of size 1, two ranks idle: the first doubles, then the second.
  const auto plan = plan_for({100, 100}, options(4, 1, 100));
  ASSERT_EQ(plan.num_microbatches(), 1);
  EXPECT_EQ(plan.microbatch(0).groups(), microbatch({{0, 2, {0}}, {2, 2, {1}}}));
}

TEST(DefaultDynamicCp, SamplesThatFitNowhereWaitForTheNextMicrobatch) {
  // G = 2: two full single-rank groups, the third sample waits and then runs alone on both ranks.
  const auto plan = plan_for({100, 100, 100}, options(2, 1, 100));
  ASSERT_EQ(plan.num_microbatches(), 2);
  EXPECT_EQ(plan.microbatch(0).groups(), microbatch({{0, 1, {0}}, {1, 1, {1}}}));
  EXPECT_EQ(plan.microbatch(1).groups(), microbatch({{0, 2, {2}}}));
}

TEST(DefaultDynamicCp, EqualLengthsKeepAscendingIdsAndTheCapHoldsBackHeavySamples) {
  // Descending by length, equal lengths by id: 7 (len 100) first. cap = 100·100·1.05 = 10500.
  // The 60s cannot share rank 0 (tokens); each takes a new single rank while ranks are free.
  const std::vector<int64_t> ids{9, 7, 8, 3};
  const std::vector<int64_t> lengths{60, 100, 60, 60};
  const auto o = options(2, 1, 100);
  const auto plan = schedule_default_dynamic_cp(ids, lengths, o);
  check_dynamic_cp_plan(plan, ids, lengths, o);
  ASSERT_EQ(plan.num_microbatches(), 2);
  EXPECT_EQ(plan.microbatch(0).groups(), microbatch({{0, 1, {7}}, {1, 1, {3}}}));
  EXPECT_EQ(plan.microbatch(1).groups(), microbatch({{0, 1, {8}}, {1, 1, {9}}}));
}

TEST(DefaultDynamicCp, DoublingThatCannotCoverTheGroupFallsBackToAllRanks) {
  // G = 5: sizes 1,1 -> 2,1 -> 2,2 -> doubling a group of 2 needs 2 ranks, 1 is idle (Megatron
  // raises IndexError here): the round runs first-fit on all 5 ranks instead.
  const auto plan = plan_for({100, 100}, options(5, 1, 100));
  ASSERT_EQ(plan.num_microbatches(), 1);
  EXPECT_EQ(plan.microbatch(0).groups(), microbatch({{0, 5, {0, 1}}}));
}

TEST(DefaultDynamicCp, VppSplitsATailMicrobatchAtHalfTheRanksAndReexpandsBothHalves) {
  // One micro-batch [2:{0}][1:{1}][1:{2,3}] and a VPP group of 2: split at rank 2; the slot keeps
  // the second half (re-expanded to [2:{1}][2:{2,3}]), the first half ([4:{0}]) goes to the end.
  const auto plan = plan_for({150, 100, 50, 50}, options(2, 2, 100, 2));
  ASSERT_EQ(plan.num_microbatches(), 2);
  EXPECT_EQ(plan.microbatch(0).groups(), microbatch({{0, 2, {1}}, {2, 2, {2, 3}}}));
  EXPECT_EQ(plan.microbatch(1).groups(), microbatch({{0, 4, {0}}}));
}

TEST(DefaultDynamicCp, RefusesWhatMegatronCannotPlan) {
  // The longest sample needs 4 ranks of 100 tokens; G = 2 (Megatron asserts).
  EXPECT_THROW(plan_for({300, 10}, options(2, 1, 100)), InvalidArgument);
  // One micro-batch with a single group cannot be split for a VPP group of 2.
  EXPECT_THROW(plan_for({100}, options(2, 1, 100, 2)), InvalidArgument);
  EXPECT_THROW(plan_for({}, options(2, 1, 100)), InvalidArgument);
  EXPECT_THROW(plan_for({0}, options(2, 1, 100)), InvalidArgument);
  EXPECT_THROW(plan_for({5}, options(2, 1, 100, 1, 0)), InvalidArgument);
}

TEST(DefaultDynamicCp, PropertiesHoldOverTenThousandRandomCases) {
  std::mt19937_64 rng(20260615);
  const int dps[] = {1, 2, 3, 4, 5, 6, 8, 16};
  const int cps[] = {1, 2, 4};
  const int multiples[] = {1, 1, 2, 4};
  int planned = 0;
  int refused = 0;
  for (int trial = 0; trial < 10000; ++trial) {
    const int dp = dps[rng() % 8];
    const int cp = cps[rng() % 3];
    const int multiple = multiples[rng() % 4];
    const int min_cp = rng() % 8 == 0 ? 2 : 1;
    const int64_t m = 64 + static_cast<int64_t>(rng() % 512);
    const auto o = options(dp, cp, m, multiple, min_cp);
    int64_t widest = 1;  // the largest power of two <= G: no sample needs more ranks than G
    while (widest * 2 <= o.ranks()) widest *= 2;
    const int64_t longest = m * widest;
    std::lognormal_distribution<double> dist(std::log(static_cast<double>(m) / 2), 1.2);
    const size_t n = 1 + rng() % 48;
    std::vector<int64_t> lengths(n);
    for (auto& len : lengths) {
      len = std::clamp<int64_t>(static_cast<int64_t>(dist(rng)), 1, longest);
    }
    const auto ids = iota_ids(n);
    Plan plan;
    try {
      plan = schedule_default_dynamic_cp(ids, lengths, o);
    } catch (const InvalidArgument& e) {
      // Only the documented refusals: min_cp above G, or a VPP group that cannot be reached.
      ASSERT_TRUE(min_cp > o.ranks() || multiple > 1) << "trial " << trial << ": " << e.what();
      ++refused;
      continue;
    }
    ASSERT_NO_THROW(check_dynamic_cp_plan(plan, ids, lengths, o)) << "trial " << trial;
    ASSERT_EQ(plan, schedule_default_dynamic_cp(ids, lengths, o)) << "trial " << trial;
    ++planned;
  }
  EXPECT_GT(planned, 8000);
  EXPECT_LT(refused, 2000);
}

// Lengths and M near INT64_MAX, and min_cp above G: both dynamic-CP schedulers refuse with one
// clear InvalidArgument (no wrapped arithmetic, no endless doubling), or plan within contract.
TEST(DynamicCpLimits, ExtremeLengthsAndMinCpAreRefusedClearly) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  using Scheduler =
      Plan (*)(std::span<const int64_t>, std::span<const int64_t>, const ScheduleOptions&);
  const Scheduler schedulers[] = {&schedule_default_dynamic_cp, &schedule_balanced_dynamic_cp};
  for (const Scheduler schedule : schedulers) {
    // A sample longer than M x dp*cp, M small.
    test_util::expect_throw_with<InvalidArgument>(
        [&] {
          schedule(std::vector<int64_t>{0, 1}, std::vector<int64_t>{kMax / 2, 8}, options(2, 2, 8));
        },
        {"more than M x dp*cp = 32"});
    test_util::expect_throw_with<InvalidArgument>(
        [&] {
          schedule(std::vector<int64_t>{0}, std::vector<int64_t>{kMax - 1}, options(1, 1, 1));
        },
        {"more than M x dp*cp = 1"});
    // M x dp*cp itself overflows.
    test_util::expect_throw_with<InvalidArgument>(
        [&] {
          schedule(std::vector<int64_t>{0}, std::vector<int64_t>{8}, options(2, 2, kMax / 2));
        },
        {"M x dp*cp overflows int64"});
    // min_cp larger than every group.
    test_util::expect_throw_with<InvalidArgument>(
        [&] {
          schedule(std::vector<int64_t>{0}, std::vector<int64_t>{8}, options(2, 2, 64, 1, 8));
        },
        {"min_cp (8) exceeds dp*cp (4)"});
  }
  // Random mixes of huge and small values: a clear refusal or a plan that keeps the contract.
  std::mt19937_64 rng(7);
  const int64_t big[] = {kMax, kMax - 1, kMax / 2 + 1, kMax / 3, int64_t{1} << 62};
  for (int trial = 0; trial < 400; ++trial) {
    const int dp = 1 + static_cast<int>(rng() % 4);
    const int cp = 1 << (rng() % 3);
    const int64_t m = rng() % 4 == 0 ? big[rng() % 5] : 1 + static_cast<int64_t>(rng() % 64);
    const int min_cp = 1 + static_cast<int>(rng() % 10);
    std::vector<int64_t> lengths(1 + rng() % 6);
    for (int64_t& l : lengths)
      l = rng() % 3 == 0 ? big[rng() % 5] : 1 + static_cast<int64_t>(rng() % 200);
    const auto ids = iota_ids(lengths.size());
    const auto o = options(dp, cp, m, 1, min_cp);
    for (const Scheduler schedule : schedulers) {
      try {
        const Plan plan = schedule(ids, lengths, o);
        check_dynamic_cp_plan(plan, ids, lengths, o);
        ASSERT_LE(min_cp, dp * cp) << "trial " << trial;
      } catch (const InvalidArgument& e) {
        ASSERT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace thdpack
