// Every scheduler's contracts over thousands of random cases (BENCHMARKS.md figure 6): each sample
// exactly once, token cap, equal micro-batch counts, VPP multiple, no empty pack, determinism.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "test_support.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/bin_packing.hpp"
#include "thdpack/schedule/plan_stats.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {
namespace {

struct RandomCase {
  testing::OwnedInput input;
  ScheduleOptions options;
};

RandomCase random_case(uint64_t seed, bool with_groups) {
  std::mt19937_64 rng(seed);
  RandomCase c;
  const int dp = std::uniform_int_distribution<int>(1, 16)(rng);
  const int cp = std::uniform_int_distribution<int>(0, 2)(rng) == 0 ? 2 : 1;
  const int multiple = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? 2 : 1;
  const int64_t m = std::uniform_int_distribution<int64_t>(64, 4096)(rng);
  const int64_t capacity = m * cp;
  const int per_rank = std::uniform_int_distribution<int>(multiple * 2, 40)(rng);
  std::vector<int64_t> lengths;
  const int style = std::uniform_int_distribution<int>(0, 2)(rng);
  for (int i = 0; i < dp * per_rank; ++i) {
    int64_t len;
    if (style == 0) {
      len = std::uniform_int_distribution<int64_t>(1, capacity)(rng);
    } else if (style == 1) {
      len = std::uniform_int_distribution<int64_t>(1, capacity / 4 + 1)(rng);
    } else {
      len = std::uniform_int_distribution<int>(0, 4)(rng) == 0
                ? std::uniform_int_distribution<int64_t>(capacity / 2, capacity)(rng)
                : std::uniform_int_distribution<int64_t>(1, capacity / 16 + 1)(rng);
    }
    lengths.push_back(len);
  }
  c.input = testing::make_input(lengths, dp);
  // Shuffle global ids so schedulers cannot rely on ids being positions.
  std::shuffle(c.input.ids.begin(), c.input.ids.end(), rng);
  if (with_groups) {
    // Groups of 1-3 consecutive samples of one rank whose total fits the capacity.
    int64_t group = 0;
    for (int r = 0; r < dp; ++r) {
      int64_t in_group = 0, tokens = 0;
      for (int i = r * per_rank; i < (r + 1) * per_rank; ++i) {
        const int64_t len = c.input.lengths[static_cast<size_t>(i)];
        if (in_group == 3 || tokens + len > capacity) ++group, in_group = 0, tokens = 0;
        c.input.group_ids.push_back(group);
        ++in_group;
        tokens += len;
      }
      ++group;
    }
  }
  c.options.dp = dp;
  c.options.cp = cp;
  c.options.microbatch_multiple = multiple;
  c.options.max_seqlen_per_dp_cp_rank = m;
  c.options.cost = CostModel{1.0, 1e-3};
  return c;
}

// True when the error is the documented "too few samples" outcome.
bool too_few_samples(const std::string& message) {
  for (const char* phrase : {"cannot", "no feasible", "needs"}) {
    if (message.find(phrase) != std::string::npos) return true;
  }
  return false;
}

// `min_planned`: share of cases that must yield a plan (grouped cases have fewer items to split).
void check_contracts(const std::string& name, bool with_groups, int cases,
                     double min_planned = 0.9) {
  const auto scheduler = make_scheduler(name);
  int planned = 0;
  for (int seed = 0; seed < cases; ++seed) {
    SCOPED_TRACE(name + " seed " + std::to_string(seed));
    const RandomCase c = random_case(static_cast<uint64_t>(seed), with_groups);
    Plan plan;
    try {
      plan = scheduler->schedule(c.input.view(), c.options);
    } catch (const InvalidArgument& e) {
      EXPECT_TRUE(too_few_samples(e.what())) << e.what();
      continue;
    }
    ++planned;
    ASSERT_NO_THROW(validate_plan(plan, c.input.view(), c.options));
    EXPECT_EQ(plan.dp(), c.options.dp);
    EXPECT_EQ(plan.num_microbatches() % c.options.microbatch_multiple, 0);
    const PlanStats stats = evaluate_plan(plan, c.input.view(), {}, c.options);
    EXPECT_EQ(stats.cap_violations, 0);
    // Determinism: a second run gives the identical plan.
    EXPECT_EQ(scheduler->schedule(c.input.view(), c.options), plan);
  }
  EXPECT_GT(planned, static_cast<int>(cases * min_planned)) << "too many cases rejected";
}

TEST(SchedulerContracts, BalancedOverThousandsOfCases) {
  check_contracts("balanced", false, 3000);
}
TEST(SchedulerContracts, DpBalancedOverThousandsOfCases) {
  check_contracts("dp_balanced", false, 3000);
}
TEST(SchedulerContracts, LocalOverThousandsOfCases) {
  check_contracts("local", false, 3000);
}
TEST(SchedulerContracts, BalancedKeepsGroupsTogether) {
  check_contracts("balanced", true, 1000);
}
TEST(SchedulerContracts, LocalKeepsGroupsTogether) {
  check_contracts("local", true, 1000, 0.5);
}

TEST(SchedulerContracts, ValidatePlanCatchesBrokenPlans) {
  const auto in = testing::make_input({5, 5, 5, 5}, 2);
  ScheduleOptions o;
  o.dp = 2;
  o.max_seqlen_per_dp_cp_rank = 10;
  test_util::expect_throw_with<InternalError>(
      [&] {
        validate_plan(Plan(2, 1, {{0, 1}, {2}}), in.view(), o);
      },
      "missing");
  test_util::expect_throw_with<InternalError>(
      [&] {
        validate_plan(Plan(2, 1, {{0, 1}, {2, 3, 3}}), in.view(), o);
      },
      "twice");
  test_util::expect_throw_with<InternalError>(
      [&] {
        validate_plan(Plan(2, 1, {{0, 1, 2}, {3}}), in.view(), o);
      },
      "capacity");
  test_util::expect_throw_with<InternalError>(
      [&] {
        validate_plan(Plan(2, 1, {{0, 1}, {2, 3}, {}, {}}), in.view(), o);
      },
      "empty");
  test_util::expect_throw_with<InternalError>(
      [&] {
        validate_plan(Plan(2, 1, {{0, 1}, {2, 7}}), in.view(), o);
      },
      "unknown");
  ScheduleOptions capped = o;
  capped.max_sequences_per_pack = 1;
  test_util::expect_throw_with<InternalError>(
      [&] {
        validate_plan(Plan(2, 1, {{0}, {1, 2}, {3}, {}}), in.view(), capped);
      },
      "more than max_sequences_per_pack 1");
}

TEST(Balanced, MicroBatchCountWithinOneOfTheLowerBound) {
  int checked = 0;
  for (int seed = 0; seed < 2000; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const RandomCase c = random_case(static_cast<uint64_t>(seed) + 100000, false);
    Plan plan;
    try {
      plan = make_scheduler("balanced")->schedule(c.input.view(), c.options);
    } catch (const InvalidArgument&) {
      continue;
    }
    const int64_t l2 = bins_lower_bound_l2(c.input.lengths, c.options.capacity());
    const int64_t multiple = c.options.microbatch_multiple;
    const int64_t bound =
        ((l2 + c.options.dp - 1) / c.options.dp + multiple - 1) / multiple * multiple;
    EXPECT_LE(plan.num_microbatches(), bound + multiple);
    ++checked;
  }
  EXPECT_GT(checked, 1500);
}

TEST(Balanced, NeverSlowerThanDpBalancedOnRandomCases) {
  int compared = 0, worse = 0;
  for (int seed = 0; seed < 1000; ++seed) {
    const RandomCase c = random_case(static_cast<uint64_t>(seed) + 200000, false);
    try {
      const Plan a = make_scheduler("balanced")->schedule(c.input.view(), c.options);
      const Plan b = make_scheduler("dp_balanced")->schedule(c.input.view(), c.options);
      const double ca = evaluate_plan(a, c.input.view(), {}, c.options).step_cost;
      const double cb = evaluate_plan(b, c.input.view(), {}, c.options).step_cost;
      ++compared;
      if (ca > cb * (1 + 1e-9)) ++worse;
    } catch (const InvalidArgument&) {
    }
  }
  EXPECT_GT(compared, 500);
  EXPECT_LE(worse, compared / 100)
      << worse << " of " << compared << " cases worse than dp_balanced";
}

TEST(Local, SamplesNeverLeaveTheirRank) {
  for (int seed = 0; seed < 500; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const RandomCase c = random_case(static_cast<uint64_t>(seed) + 300000, false);
    Plan plan;
    try {
      plan = make_scheduler("local")->schedule(c.input.view(), c.options);
    } catch (const InvalidArgument&) {
      continue;
    }
    const auto per_rank = c.input.samples_per_rank[0];
    for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
      for (int r = 0; r < plan.dp(); ++r) {
        for (int64_t id : plan.pack(k, r)) {
          const auto pos =
              std::find(c.input.ids.begin(), c.input.ids.end(), id) - c.input.ids.begin();
          EXPECT_EQ(pos / per_rank, r) << "sample " << id << " moved to replica " << r;
        }
      }
    }
  }
}

TEST(Local, GroupSpanningRanksIsRejected) {
  auto in = testing::make_input({1, 2, 3, 4}, 2);
  in.group_ids = {0, 1, 1, 2};
  ScheduleOptions o;
  o.dp = 2;
  o.max_seqlen_per_dp_cp_rank = 100;
  test_util::expect_throw_with<InvalidArgument>(
      [&] { make_scheduler("local")->schedule(in.view(), o); }, "never moves samples");
}

TEST(ScheduleInputValidation, RejectsBadInput) {
  ScheduleOptions o;
  o.dp = 2;
  o.max_seqlen_per_dp_cp_rank = 100;
  for (const auto& name : scheduler_names(CpLayout::kFixed)) {
    SCOPED_TRACE(name);
    const auto s = make_scheduler(name);
    auto zero = testing::make_input({5, 0, 5, 5}, 2);
    test_util::expect_throw_with<InvalidArgument>([&] { s->schedule(zero.view(), o); },
                                                  "lengths must be >= 1");
    auto negative = testing::make_input({5, -3, 5, 5}, 2);
    test_util::expect_throw_with<InvalidArgument>([&] { s->schedule(negative.view(), o); }, ">= 1");
    auto dup = testing::make_input({5, 5, 5, 5}, 2);
    dup.ids[3] = 0;
    test_util::expect_throw_with<InvalidArgument>([&] { s->schedule(dup.view(), o); },
                                                  "appears twice");
    auto few = testing::make_input({5, 5}, 2);
    ScheduleOptions vpp = o;
    vpp.microbatch_multiple = 2;
    test_util::expect_throw_with<InvalidArgument>([&] { s->schedule(few.view(), vpp); },
                                                  "dp x vpp group");
    auto odd = testing::make_input({5, 5, 5}, 1);
    odd.samples_per_rank = {};
    test_util::expect_throw_with<InvalidArgument>([&] { s->schedule(odd.view(), o); },
                                                  "split equally");
    auto big = testing::make_input({5, 500, 5, 5}, 2);
    test_util::expect_throw_with<InvalidArgument>([&] { s->schedule(big.view(), o); },
                                                  "max_seqlen_per_dp_cp_rank (-M)");
    auto mismatched = testing::make_input({5, 5, 5, 5}, 2);
    mismatched.lengths.pop_back();
    test_util::expect_throw_with<InvalidArgument>([&] { s->schedule(mismatched.view(), o); },
                                                  "lengths");
  }
  test_util::expect_throw_with<InvalidArgument>([] { make_scheduler("fastest"); },
                                                "balanced, dp_balanced, local");
}

}  // namespace
}  // namespace thdpack
