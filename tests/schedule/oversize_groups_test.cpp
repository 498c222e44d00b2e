// "balanced" with groups larger than one pack: every such group on one replica over consecutive
// micro-batches, the other contracts kept, over many random cases; validate_plan catches plans
// that break the rule.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "test_support.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/plan_stats.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {
namespace {

struct GroupedCase {
  testing::OwnedInput input;
  ScheduleOptions options;
  bool oversize = false;  // some group is longer than one pack
};

// Groups of 1 to 32 samples whose totals range from a fraction of a pack to several packs,
// shuffled over the DP ranks.
GroupedCase grouped_case(uint64_t seed) {
  std::mt19937_64 rng(seed);
  GroupedCase c;
  const int dp = std::uniform_int_distribution<int>(1, 8)(rng);
  const int cp = std::uniform_int_distribution<int>(0, 2)(rng) == 0 ? 2 : 1;
  const int multiple = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? 2 : 1;
  const int64_t m = std::uniform_int_distribution<int64_t>(64, 4096)(rng);
  const int64_t capacity = m * cp;
  std::vector<int64_t> lengths, groups;
  const int group_count = dp * multiple * 3 + std::uniform_int_distribution<int>(2, 20)(rng);
  for (int g = 0; g < group_count; ++g) {
    const int size = 1 << std::uniform_int_distribution<int>(0, 5)(rng);
    const int64_t longest =
        std::vector<int64_t>{capacity / 8 + 1, capacity / 3 + 1,
                             capacity}[std::uniform_int_distribution<int>(0, 2)(rng)];
    int64_t total = 0;
    for (int i = 0; i < size; ++i) {
      lengths.push_back(std::uniform_int_distribution<int64_t>(1, longest)(rng));
      total += lengths.back();
      groups.push_back(1000 - 7 * g);  // ids neither dense nor in order
    }
    c.oversize = c.oversize || total > capacity;
  }
  std::vector<size_t> order(lengths.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int64_t> shuffled_lengths, shuffled_groups;
  for (size_t i : order) {
    shuffled_lengths.push_back(lengths[i]);
    shuffled_groups.push_back(groups[i]);
  }
  c.input = testing::make_input(shuffled_lengths, 1);
  c.input.samples_per_rank.clear();
  c.input.group_ids = shuffled_groups;
  c.options.dp = dp;
  c.options.cp = cp;
  c.options.microbatch_multiple = multiple;
  c.options.max_seqlen_per_dp_cp_rank = m;
  c.options.cost = CostModel{1.0, 1e-3};
  // The ids samples_per_rank would split need an even count; give the remainder to rank 0.
  c.input.samples_per_rank.assign(static_cast<size_t>(dp),
                                  static_cast<int64_t>(lengths.size()) / dp);
  c.input.samples_per_rank[0] += static_cast<int64_t>(lengths.size()) % dp;
  return c;
}

TEST(OversizeGroups, StayOnOneReplicaOverConsecutiveMicroBatches) {
  const auto scheduler = make_scheduler("balanced");
  int planned = 0, oversize = 0;
  for (int seed = 0; seed < 600; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const GroupedCase c = grouped_case(static_cast<uint64_t>(seed));
    Plan plan;
    try {
      plan = scheduler->schedule(c.input.view(), c.options);
    } catch (const InvalidArgument& e) {
      const std::string message = e.what();
      EXPECT_TRUE(message.find("needs") != std::string::npos ||
                  message.find("cannot fill") != std::string::npos)
          << message;
      continue;
    }
    ++planned;
    oversize += c.oversize ? 1 : 0;
    ASSERT_NO_THROW(validate_plan(plan, c.input.view(), c.options));
    EXPECT_EQ(plan.num_microbatches() % c.options.microbatch_multiple, 0);
    EXPECT_EQ(scheduler->schedule(c.input.view(), c.options), plan);
  }
  EXPECT_GT(planned, 500);
  EXPECT_GT(oversize, 400);
}

TEST(OversizeGroups, ASampleLongerThanThePackIsRefused) {
  auto in = testing::make_input({600, 600, 1100, 10, 10, 10}, 1);
  in.group_ids = {5, 5, 5, 1, 2, 3};
  ScheduleOptions o;
  o.max_seqlen_per_dp_cp_rank = 1000;
  test_util::expect_throw_with<InvalidArgument>(
      [&] { make_scheduler("balanced")->schedule(in.view(), o); },
      "sample 2 has 1100 padded tokens but the cap is 1000");
}

TEST(OversizeGroups, ValidatePlanCatchesAGroupSplitOverReplicasOrSteps) {
  // Group 7 holds 3 x 600 tokens over a 1000-token pack.
  auto in = testing::make_input({600, 600, 600, 10, 10, 10, 10, 10}, 2);
  in.group_ids = {7, 7, 7, 1, 2, 3, 4, 5};
  ScheduleOptions o;
  o.dp = 2;
  o.max_seqlen_per_dp_cp_rank = 1000;
  // Packs in step-major order: (k0 r0) (k0 r1) (k1 r0) (k1 r1) (k2 r0) (k2 r1).
  EXPECT_NO_THROW(validate_plan(Plan(2, 1, {{0}, {3}, {1}, {4, 5}, {2}, {6, 7}}), in.view(), o));
  test_util::expect_throw_with<InternalError>(
      [&] {
        validate_plan(Plan(2, 1, {{0}, {1}, {2}, {4, 5}, {3}, {6, 7}}), in.view(), o);
      },
      "split across replicas");
  test_util::expect_throw_with<InternalError>(
      [&] {
        validate_plan(Plan(2, 1, {{0}, {3}, {1}, {2}, {4, 5}, {6, 7}}), in.view(), o);
      },
      "split across replicas");
  test_util::expect_throw_with<InternalError>(
      [&] {
        validate_plan(Plan(2, 1, {{0}, {3}, {4}, {5}, {1}, {6}, {2}, {7}}), in.view(), o);
      },
      "not in consecutive");
}

}  // namespace
}  // namespace thdpack
